"""Pure helpers for ``bench/pulsar_head_to_head.py``: runs over seeds, aggregated per phase, as tables.

A *run* is one contender on one seed: the JSON ``run_one`` writes, of which this reads ``name``,
``label``, ``seed``, ``per_phase`` (phase -> metric -> value) and the bookkeeping the runs table
shows. Over seeds every metric is reported as its median and its worst (highest) value.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# ``boot``: from the end of ``skew`` until the joining broker answers ready (its JVM starting); moves
# made then are reported there rather than lost between phases
PHASES = ("skew", "boot", "join", "hot", "quiet")
NEVER = "never"
NO_MOVE = "–"  # the metric is taken around moves, and the phase had none


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    digits: int
    # None means the worst outcome ("never balanced"), not "does not apply" ("no move to measure")
    none_is_worst: bool = False


METRICS = (
    Metric("balanced_s", "balanced after (s)", 0, none_is_worst=True),
    Metric("moves", "moves", 0),
    Metric("gap_s", "longest gap per move (s)", 1),
    Metric("p99_ms", "p99 around moves (ms)", 0),
    Metric("failed", "failed sends", 0),
    Metric("lost", "acked, never received", 0),
)


def over_seeds(values: Sequence[float | None], none_is_worst: bool) -> tuple[float, float] | None:
    """(median, worst) of one metric over seeds; ``inf`` stands for "never" when ``none_is_worst``,
    otherwise a None (nothing to measure in that seed) is left out. None without any value."""
    if none_is_worst:
        xs = [math.inf if v is None else float(v) for v in values]
    else:
        xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    return float(statistics.median(xs)), max(xs)


def aggregate(
    runs: Sequence[Mapping[str, Any]], phases: Sequence[str] = PHASES
) -> dict[str, dict[str, tuple[float, float] | None]]:
    """phase -> metric -> (median, worst) over ``runs`` (one contender's runs, one per seed)."""
    out: dict[str, dict[str, tuple[float, float] | None]] = {}
    for p in phases:
        out[p] = {}
        for m in METRICS:
            values = [r["per_phase"].get(p, {}).get(m.key) for r in runs]
            out[p][m.key] = over_seeds(values, m.none_is_worst)
    return out


def _cell(v: float, m: Metric) -> str:
    if math.isinf(v):
        return NEVER
    return f"{v:,.{m.digits}f}"


def cell(pair: tuple[float, float] | None, m: Metric) -> str:
    if pair is None:
        return NO_MOVE
    med, worst = pair
    return f"{_cell(med, m)} / {_cell(worst, m)}"


def by_contender(runs: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Runs grouped by contender name, in the order first seen, each group ordered by seed."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        out.setdefault(r["name"], []).append(r)
    return {k: sorted(v, key=lambda r: int(r["seed"])) for k, v in out.items()}


def phase_table(runs: Sequence[Mapping[str, Any]], phases: Sequence[str] = PHASES) -> str:
    """Median / worst over seeds, a row per contender and phase."""
    head = "| contender | phase | seeds | " + " | ".join(f"{m.title} median / worst" for m in METRICS)
    rows = [head + " |", "|" + "---|" * (3 + len(METRICS))]
    for group in by_contender(runs).values():
        agg = aggregate(group, phases)
        seeds = ",".join(str(r["seed"]) for r in group)
        for p in phases:
            cells = " | ".join(cell(agg[p][m.key], m) for m in METRICS)
            rows.append(f"| {group[0]['label']} | {p} | {seeds} | {cells} |")
    return "\n".join(rows) + "\n"


LOAD = re.compile(r"load averages?:\s*([\d.]+),?\s+([\d.]+),?\s+([\d.]+)")


def load_of(uptime: str) -> str:
    """``uptime``'s three load averages as ``1m / 5m / 15m``; ``?`` when it says something else."""
    found = LOAD.search(uptime or "")
    return " / ".join(found.groups()) if found else "?"


def runs_table(runs: Sequence[Mapping[str, Any]]) -> str:
    """One row per run: when, how long, the machine's load beside it, and its totals."""
    rows = [
        "| workload | seed | contender | started (UTC) | wall (s) | load at start (1/5/15 min) "
        "| load at end | moves | acked | failed sends | acked, never received |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(runs, key=lambda r: (r.get("workload", ""), int(r["seed"]), r["name"])):
        rows.append(
            f"| {r.get('workload', '?')} | {r['seed']} | {r['label']} | {r.get('started_utc', '?')} "
            f"| {r.get('wall_s', 0):,.0f} | {load_of(r.get('uptime_start', ''))} "
            f"| {load_of(r.get('uptime_end', ''))} | {len(r.get('moves', []))} | {r.get('acked', 0):,} "
            f"| {r.get('failed_sends', 0)} | {r.get('lost_acked', 0)} |"
        )
    return "\n".join(rows) + "\n"
