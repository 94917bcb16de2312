"""``loadmgr replay``'s output: the side-by-side table (rich), the JSON file and one PNG per strategy.

Everything reads the JSON-able comparison built by :func:`service.commands.replay.compare`, so the
terminal, the file and the plots can never disagree.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any


def _num(v: Any, fmt: str = "{:.2f}") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "inf"
    return fmt.format(v)


def print_table(c: dict[str, Any], console: Any = None) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table

    # Piped to a file or a CI log, rich would wrap at 80 columns and split every number from its unit.
    console = console or Console(width=None if sys.stdout.isatty() else 150)
    title = (
        f"Replay of {c['cycles']} recorded cycles over {span_text(c)}, {len(c['brokers'])} brokers, "
        f"{c['bundles']} bundles"
    )
    t = Table(title=title, title_justify="left")
    t.add_column("strategy", no_wrap=True)
    for name in ("moves", "moved msg/s", "cycles to balanced", "final msg/s max/min", "final util spread",
                 "mean util spread", "uphill moves"):  # fmt: skip
        t.add_column(name, justify="right")
    for run in c["runs"]:
        q = run["quality"]
        ratio = None if q.get("final_rate_ratio_is_inf") else q["final_rate_ratio"]
        name = run["strategy"] + (" *" if run.get("recorded_pair") else "")
        t.add_row(
            f"[bold]{name}[/bold]" if run["recorded"] else name,
            str(q["unloads"]),
            _num(q["moved_rate"], "{:,.0f}"),
            _num(q["cycles_to_balanced"], "{}"),
            _num(ratio) if ratio is not None else "inf",
            _num(q["final_cpu_range"], "{:.1f} pts"),
            _num(run["mean_util_spread"], "{:.1f} pts"),
            str(q["uphill_moves"]),
        )
    console.print(t)
    for line in decision_lines(c):
        console.print(line, markup=False, highlight=False)
    console.print(
        "* the recorded strategy, replayed; utilisation = max(CPU, NIC in, NIC out) in % of each broker; "
        "balanced = msg/s max/min <= 1.25 per unit of capacity"
    )
    e = Table(
        title=f"How well the model reproduces the recorded utilisation ({c['recorded_strategy']})",
        title_justify="left",
    )
    e.add_column("broker", no_wrap=True)
    for name in (
        "recorded mean",
        "replay |err|",
        "replay rmse",
        "replay bias",
        "model-only |err|",
        "samples",
    ):
        e.add_column(name, justify="right")
    for broker, err in c["recorded_replay_error"].items():
        m = c["model_error"].get(broker, {})
        e.add_row(
            broker,
            _num(err["recorded_mean"], "{:.1f} %"),
            _num(err["mean_abs"], "{:.2f} pts"),
            _num(err["rmse"], "{:.2f} pts"),
            _num(err["bias"], "{:+.2f} pts"),
            _num(m.get("mean_abs"), "{:.2f} pts"),
            str(err["samples"]),
        )
    console.print(e)
    console.print(
        "replay = the recorded strategy replayed (its own decisions); model-only = the model on the "
        "ownership the leader really had, so the difference is what the replayed decisions changed"
    )
    console.print("[bold]Model assumptions[/bold] (" + c.get("config_source", "") + "):")
    for a in c["assumptions"]:
        console.print(f"  - {a}")
    fallback = [b for b, m in c["model"].items() if m["fleet_median_line"]]
    if fallback:
        console.print(f"  - on the fleet's median capacity line (CPU never varied): {', '.join(fallback)}")


def _clock(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def span_text(c: dict[str, Any]) -> str:
    """``17.4 min (23:42:46 to 00:00:10 UTC; one cycle every 5.0 s; 1 gap: 11.0 min without cycles)``:
    the real time the cycles cover, gaps included and named, never cycles x interval."""
    span = c.get("span_minutes", c["cycles"] * c["interval_minutes"])
    text = f"{span:.1f} min"
    if "start_ms" in c and "end_ms" in c:
        text += f" ({_clock(c['start_ms'])} to {_clock(c['end_ms'])[11:]} UTC"
    else:
        text += " ("
    text += f"; one cycle every {c['interval_minutes'] * 60:.1f} s"
    gaps = c.get("gaps") or []
    if gaps:
        total = sum(g["minutes"] for g in gaps)
        text += f"; {len(gaps)} gap{'s' if len(gaps) > 1 else ''}: {total:.1f} min without cycles"
    return text + ")"


def decision_lines(c: dict[str, Any]) -> list[str]:
    """Who moved what in the recorded run: the leader's shedding moves (what every replay re-decides),
    the operator's (made in every replay as recorded), the rest (orphans, splits), and the gaps."""
    if "moves_by_kind" not in c:
        return []
    kinds = c["moves_by_kind"]
    source = (
        "from the recorded decisions"
        if c.get("decisions_recorded")
        else "inferred: this history records no decision kinds (written before they were recorded)"
    )
    lines = [
        f"Recorded moves by kind ({source}): "
        + (", ".join(f"{k} {n}" for k, n in kinds.items()) if kinds else "none")
    ]
    lines.append(
        f"  live leader: {len(c.get('leader_moves', []))} shedding moves (the row above; each replay "
        "re-decides these)"
    )
    ops = c.get("operator_moves", [])
    if ops:
        lines.append(
            f"  operator: {len(ops)} move(s), not the leader's; every replay makes them as recorded:"
        )
        for m in ops[:10]:
            lines.append(
                f"    {_clock(m['time_ms'])} UTC  {m['bundle']}  {m['source']} -> {m['destination']}"
            )
        if len(ops) > 10:
            lines.append(f"    ... and {len(ops) - 10} more (--json lists them all)")
    else:
        lines.append("  operator: none")
    for g in c.get("gaps") or []:
        lines.append(
            f"  gap: no cycle from {_clock(g['from_ms'])} to {_clock(g['to_ms'])[11:]} UTC "
            f"({g['minutes']:.1f} min); the plots leave it blank"
        )
    return lines


def finite(v: Any) -> Any:
    """The comparison with every NaN or infinity as None (JSON and YAML have no such numbers)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return v


def write_json(c: dict[str, Any], path: str) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(finite(c), indent=1))


def plot_name(strategy: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", strategy).strip("-").lower() + ".png"


def _minutes(c: dict[str, Any]) -> list[float]:
    """Each replayed state's real time, in minutes since the first recorded cycle (gaps kept)."""
    times = c.get("state_times_ms")
    n = len(next(r for r in c["runs"] if r["recorded"])["util_spread"])
    if not times or len(times) != n:
        return [(i + 1) * c["interval_minutes"] for i in range(n)]
    return [(t - c["start_ms"]) / 60_000 for t in times]


def _broken(
    xs: list[float], ys: list[float], gaps: list[tuple[float, float]]
) -> tuple[list[float], list[float]]:
    """The series with a NaN point inside each gap, so matplotlib leaves the gap blank instead of
    drawing a line across time nobody recorded."""
    out_x: list[float] = []
    out_y: list[float] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if i and any(xs[i - 1] <= a and x >= b for a, b in gaps):
            out_x.append((xs[i - 1] + x) / 2)
            out_y.append(math.nan)
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


def write_plots(c: dict[str, Any], directory: str) -> list[Path]:
    """One PNG per replayed strategy: its utilisation spread over real time, over the recorded one, with
    the live leader's and the operator's moves marked and the history's gaps shaded."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed on a server
    import matplotlib.pyplot as plt

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    live = next(r for r in c["runs"] if r["recorded"])
    xs = _minutes(c)
    t0 = c.get("start_ms", 0)
    gaps = [((g["from_ms"] - t0) / 60_000, (g["to_ms"] - t0) / 60_000) for g in c.get("gaps") or []]

    def at(moves: list[dict[str, Any]]) -> list[float]:
        return [(m["time_ms"] - t0) / 60_000 for m in moves if "time_ms" in m]

    leader_x, operator_x = at(c.get("leader_moves", [])), at(c.get("operator_moves", []))
    written = []
    for run in c["runs"]:
        if run["recorded"]:
            continue
        fig, ax = plt.subplots(figsize=(10, 4.6), dpi=100)
        ax.plot(*_broken(xs, live["util_spread"], gaps), color="0.55", lw=1.2, label="live leader (recorded)")
        ax.plot(
            *_broken(xs, run["util_spread"], gaps),
            color="tab:blue",
            lw=1.6,
            label=f"{run['strategy']} (replayed)",
        )
        top = max([*live["util_spread"], *run["util_spread"], 1.0])
        moves = _move_cycles(run)
        if moves:
            mx = [xs[i] for i in moves if 0 <= i < len(xs)]
            ax.plot(mx, [0.0] * len(mx), "|", color="tab:blue", ms=10, label="replayed moves")
        if leader_x:
            ax.plot(
                leader_x, [top * 1.04] * len(leader_x), "|", color="0.3", ms=10, label="live leader's moves"
            )
        if operator_x:
            ax.plot(
                operator_x, [top * 1.04] * len(operator_x), "v", color="tab:red", ms=7, label="operator moves"
            )
        for i, (a, b) in enumerate(gaps):
            ax.axvspan(a, b, color="0.85", alpha=0.6, lw=0, label="no history (gap)" if i == 0 else None)
        q = run["quality"]
        ax.set_title(
            f"{run['strategy']}: {q['unloads']} moves, mean spread {run['mean_util_spread']:.1f} pts"
            f" (live leader {live['mean_util_spread']:.1f}, {len(leader_x)} moves)",
            fontsize=10,
        )
        ax.set_xlabel(f"minutes since the first recorded cycle ({_clock(t0)} UTC)")
        ax.set_ylabel("utilisation max - min (pts)")
        ax.set_ylim(bottom=0, top=top * 1.1)
        ax.grid(alpha=0.3)
        # Below the axes: a legend inside would hide whatever spike lies under it.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8, frameon=False)
        fig.tight_layout()
        path = root / plot_name(run["strategy"])
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def _move_cycles(run: dict[str, Any]) -> list[int]:
    return list(run.get("move_cycles", []))
