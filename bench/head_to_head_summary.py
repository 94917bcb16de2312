"""What one head-to-head run says, from its samples and its clients' records (``summarise``, the JSON
a run writes), and its plot."""

from __future__ import annotations

import argparse
from bisect import bisect_right
from pathlib import Path
from typing import Any

from bench.head_to_head_metrics import (
    count_by_phase,
    longest_gap_near,
    merge_windows,
    moves_from_ownership,
    percentile,
    spread,
    time_to_balance,
)
from bench.head_to_head_report import PHASES
from bench.head_to_head_sampler import Sampler


def summarise(
    name: str,
    label: str,
    seed: int,
    settings: dict[str, str],
    phases: dict[str, list[float]],
    sampler: Sampler,
    work: Any,
    checker: Any,
    missing: dict[str, list[int]],
    topics: dict[str, str],
    args: argparse.Namespace,
    meta: dict[str, Any],
) -> dict[str, Any]:
    moves = moves_from_ownership(sampler.owners)
    t0 = phases["skew"][0]

    def phase_of(t: float) -> str:
        return next((p for p, (a, b) in phases.items() if a <= t < b), "outside")

    by_bundle: dict[str, list[str]] = {}
    for t, b in topics.items():
        by_bundle.setdefault(b, []).append(t)
    gap_per_move = [
        max(longest_gap_near(work.records[t].gaps, m.t - args.poll - 5, m.t + 5) for t in by_bundle[m.bundle])
        for m in moves
    ]
    # publish latency of every message sent around a move, by the move's phase
    windows = {
        p: merge_windows([(m.t - args.poll - 2, m.t + 10) for m in moves if phase_of(m.t) == p])
        for p in PHASES
    }
    lat: dict[str, list[float]] = {p: [] for p in PHASES}
    lat_quiet: list[float] = []
    qa, qb = phases["quiet"]
    for rec in work.records.values():
        for s, latency in zip(rec.sent_at, rec.latency, strict=True):
            for p, w in windows.items():
                i = bisect_right(w, (s, float("inf"))) - 1
                if i >= 0 and s < w[i][1]:
                    lat[p].append(latency)
            if qa <= s < qb:
                lat_quiet.append(latency)
    ttb = {p: time_to_balance(sampler.rates, a, b, hold_s=args.hold) for p, (a, b) in phases.items()}
    lost_by_phase = count_by_phase(missing, work.marks)
    failed_by_phase = count_by_phase(work.failed_seqs, work.marks)
    per_phase: dict[str, dict[str, float | int | None]] = {}
    for p in PHASES:
        gaps = [g for m, g in zip(moves, gap_per_move, strict=True) if phase_of(m.t) == p]
        p99 = percentile(lat[p], 99)
        per_phase[p] = {
            "balanced_s": ttb.get(p),
            "moves": sum(1 for m in moves if phase_of(m.t) == p),
            "gap_s": max(gaps) if gaps else None,
            "p99_ms": None if p99 is None else 1000 * p99,
            "failed": failed_by_phase.get(p, 0),
            "lost": lost_by_phase.get(p, 0),
        }
    end_spread = {
        p: percentile([spread(r) for t, r in sampler.rates if b - 60 <= t <= b], 50)
        for p, (a, b) in phases.items()
    }
    p99q = percentile(lat_quiet, 99)
    return {
        "name": name,
        "label": label,
        "seed": seed,
        "workload": args.workload,
        "broker_cpus": list(args.broker_cpus),
        "settings": settings,
        "own_hosts": args.own_hosts,  # a network namespace (own NIC) per broker
        "phase_seconds": {"skew": args.skew_s, "join": args.join_s, "hot": args.hot_s, "quiet": args.quiet_s},
        "hold_s": args.hold,
        **meta,
        "phases": {p: [a - t0, b - t0] for p, (a, b) in phases.items()},
        "per_phase": per_phase,
        "time_to_balance_s": ttb,
        "median_spread_last_minute": end_spread,
        "moves": [
            {"t": m.t - t0, "bundle": m.bundle, "from": m.source, "to": m.destination, "phase": phase_of(m.t)}
            for m in moves
        ],
        "moves_per_phase": {p: sum(1 for m in moves if phase_of(m.t) == p) for p in (*PHASES, "outside")},
        "sent": work.sent(),
        "failed_sends": work.failed(),
        "failed_by_phase": failed_by_phase,
        "acked": work.acked(),
        "lost_acked": sum(len(v) for v in missing.values()),
        "lost_by_phase": lost_by_phase,
        "lost_examples": {t: v[:20] for t, v in missing.items() if v},
        "consumer": checker.summary(),
        "gap_per_move_s": gap_per_move,
        "p99_ms_quiet": None if p99q is None else 1000 * p99q,
        "rates": [[t - t0, r] for t, r in sampler.rates],
        "usage": [[t - t0, u] for t, u in sampler.usage],
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.5))
    brokers = sorted({b for _, r in result["rates"] for b in r})
    for b in brokers:
        pts = [(t / 60, r[b]) for t, r in result["rates"] if b in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=b, linewidth=1.2)
    for i, m in enumerate(result["moves"]):
        ax.axvline(m["t"] / 60, color="grey", alpha=0.5, linewidth=0.8, label="move" if i == 0 else None)
    for p, (a, _b) in result["phases"].items():
        ax.axvline(a / 60, color="black", linestyle="--", linewidth=1)
        ax.text(a / 60, ax.get_ylim()[1] * 0.95, f" {p}", fontsize=9)
    ax.set_xlabel("minutes since balancing was switched on")
    ax.set_ylabel("msg/s in (broker-stats/topics)")
    ax.set_title(f"{result['label']}, seed {result.get('seed', '?')}: {len(result['moves'])} moves")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
