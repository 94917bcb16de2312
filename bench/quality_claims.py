"""Verdicts of the quality bench: formatting, the ours-against-baseline comparison, the Must-show
claims (on the table's seed and on the re-check seeds) and costs at equal balance. Pure functions
over the cells and rows :mod:`quality` produces."""

from __future__ import annotations

import math
from typing import Any

from balancer.sim.metrics import BALANCED_RATIO as BALANCED

OURS, BASE = "BalancedShedder", "AvgShedder"
# Lower is better for every metric but these (none at present); None / n/a counts as worst.
METRICS = [
    ("cycles_to_balanced", "cycles to balanced"),
    ("minutes_to_balanced", "min"),
    ("final_rate_ratio", "rate max/min"),
    ("final_tp_ratio", "tp max/min"),
    ("final_cpu_range", "CPU range"),
    ("unloads", "unloads"),
    ("moved_rate", "moved msg/s"),
    ("moved_vs_lower_bound", "moved/LB"),
    ("uphill_moves", "uphill"),
    ("jitter_unloads", "jitter unloads"),
]
COSTS = {"unloads", "moved_rate", "moved_vs_lower_bound"}


# Final-state metrics (max/min ratios, CPU range) move with each seed's noise: ours and the baseline are
# compared on their mean over this many seeds, in every scenario but large_cluster (too slow; far apart).
SEED_CHECK = 10
FINAL_METRICS = ("final_rate_ratio", "final_tp_ratio", "final_cpu_range")
SEED_FIELDS = (
    *FINAL_METRICS,
    "cycles_to_balanced",
    "unloads",
    "jitter_unloads",
    "uphill_moves",
    "moved_vs_lower_bound",
)


def fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if math.isinf(v):
            return "∞"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
    return str(v)


def key(v: Any) -> float:
    return math.inf if v is None else float(v)


def compare(ours: Any, base: Any) -> int:
    """-1 ours better, 0 equal, 1 worse (lower is better; None is worst). Floats within 1%
    (or 0.01 absolute) count as equal: differences below that are seed noise, not strategy."""
    a, b = key(ours), key(base)
    floats = isinstance(ours, float) or isinstance(base, float)
    if a == b or (floats and math.isclose(a, b, rel_tol=0.01, abs_tol=0.01)):
        return 0
    return -1 if a < b else 1


def claims(by: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The issue's Must-show list, each with the numbers it rests on and PASS/FAIL."""
    out: list[str] = []

    def q(name: str) -> Any:
        c = by.get((name, OURS))
        return None if c is None else c["q"]

    def check(ok: bool, text: str) -> None:
        out.append(f"- {'PASS' if ok else 'FAIL'}: {text}")

    for name in ("periodic_jitter", "cpu_spike", "seed_traffic_surge"):
        x = q(name)
        if x is not None:
            check(
                x.jitter_unloads == 0 and x.unloads == 0,
                f"{name}: {x.unloads} unloads, {x.jitter_unloads} caused by jitter (want 0)",
            )
    x = q("scale_out")
    if x is not None:
        check(
            x.cycles_to_balanced is not None and x.cycles_to_balanced <= 3 and x.final_rate_ratio <= 1.25,
            f"scale_out: balanced after {fmt(x.cycles_to_balanced)} shedding cycle(s), final msg-rate"
            f" max/min {x.final_rate_ratio:.2f} (want <= 3 and <= 1.25)",
        )
    x = q("heterogeneous")
    if x is not None:
        check(
            x.uphill_moves == 0,
            f"heterogeneous: {x.uphill_moves} moves from a less to a more utilised broker",
        )
    ratios = {n: q(n).moved_vs_lower_bound for n, _ in by if n and q(n) is not None}
    worst = max((v for v in ratios.values() if v is not None), default=0.0)
    check(
        worst <= 1.3,
        "moved traffic / lower bound <= 1.3 in every scenario (worst "
        f"{worst:.2f}: " + ", ".join(f"{n} {fmt(v)}" for n, v in sorted(ratios.items())) + ")",
    )
    return out


def seed_claims(rows: list[dict[str, Any]]) -> list[str]:
    """The Must-show claims on every re-check seed (ours only), not just the table's seed."""
    mine = [r for r in rows if r["strategy"] == OURS]
    if not mine:
        return []
    seeds = sorted({r["seed"] for r in mine})
    span = f"seeds {seeds[0]}..{seeds[-1]}"

    def of(name: str) -> list[dict[str, Any]]:
        return [r for r in mine if r["scenario"] == name]

    out = []
    quiet = [r for n in ("periodic_jitter", "cpu_spike", "seed_traffic_surge") for r in of(n)]
    if quiet:
        bad = [f"{r['scenario']} seed {r['seed']}" for r in quiet if r["unloads"] or r["jitter_unloads"]]
        out.append(
            f"- {'PASS' if not bad else 'FAIL'}: no unloads under jitter or spikes on {span}"
            + (f" (unloads on {', '.join(bad)})" if bad else f" ({len(quiet)} runs)")
        )
    so = of("scale_out")
    if so:
        worst = max((r["cycles_to_balanced"] or 10**6) for r in so)
        ratio = max(r["final_rate_ratio"] for r in so)
        out.append(
            f"- {'PASS' if worst <= 3 and ratio <= BALANCED else 'FAIL'}: scale_out balanced within"
            f" {fmt(worst if worst < 10**6 else None)} cycles on every one of {span}, final msg-rate max/min"
            f" at most {ratio:.2f}"
        )
    het = of("heterogeneous")
    if het:
        up = sum(r["uphill_moves"] for r in het)
        out.append(f"- {'PASS' if up == 0 else 'FAIL'}: heterogeneous: {up} uphill moves over {span}")
    lb = [r["moved_vs_lower_bound"] for r in mine if r["moved_vs_lower_bound"] is not None]
    worst_lb = max(lb, default=0.0)
    out.append(
        f"- {'PASS' if worst_lb <= 1.3 else 'FAIL'}: moved traffic / lower bound at most {worst_lb:.2f} over"
        f" every scenario and {span}"
    )
    never = [f"{r['scenario']} seed {r['seed']}" for r in mine if r["cycles_to_balanced"] is None]
    out.append(
        f"- {'PASS' if not never else 'FAIL'}: balanced at some point in every scenario, every one of {span}"
        + (f" (never: {', '.join(never)})" if never else "")
    )
    return out


def final_checks(cells: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(scenario, final metric) compared on seed means: every scenario where both runs exist."""
    names = {c["scenario"] for c in cells}
    have = {(c["scenario"], c["strategy"]) for c in cells}
    return [
        (n, k)
        for n in sorted(names)
        if n != "large_cluster" and (n, OURS) in have and (n, BASE) in have
        for k in FINAL_METRICS
    ]


def seed_summary(rows: list[dict[str, Any]], todo: list[tuple[str, str]]) -> dict[tuple[str, str], Any]:
    """(wins, losses, mean of ours, mean of the baseline) over the re-check seeds."""
    val = {(r["scenario"], r["strategy"], r["seed"], k): r[k] for r in rows for k in FINAL_METRICS}
    seeds = sorted({r["seed"] for r in rows})
    out: dict[tuple[str, str], Any] = {}
    for n, k in todo:
        wins = sum(1 for sd in seeds if compare(val[(n, OURS, sd, k)], val[(n, BASE, sd, k)]) < 0)
        losses = sum(1 for sd in seeds if compare(val[(n, OURS, sd, k)], val[(n, BASE, sd, k)]) > 0)
        mean_o = sum(val[(n, OURS, sd, k)] for sd in seeds) / len(seeds)
        mean_b = sum(val[(n, BASE, sd, k)] for sd in seeds) / len(seeds)
        out[(n, k)] = (wins, losses, mean_o, mean_b)
    return out


def at_own_balance(o: dict[str, Any], b: dict[str, Any]) -> str:
    """Both runs' moves since the last disturbance against the least for the balance each reached."""

    def part(c: dict[str, Any], who: str) -> str:
        q = c["q"]
        return (
            f"{who} {fmt(c['unloads_since'])} unloads / {fmt(c['moved_since'])} msg/s to reach"
            f" {fmt(q.final_rate_ratio)}, where the least is {fmt(q.final_bound_unloads)} /"
            f" {fmt(q.final_bound_rate)}"
        )

    return f"at the balance each reached: {part(o, 'we moved')}; {part(b, BASE)}"


def cost_ratios(c: dict[str, Any]) -> tuple[float | None, float | None]:
    """(moved / least, unloads / least) since the last disturbance; None where the least is 0 or the
    run moved nothing (its final balance then came from traffic drift, not from what it paid)."""
    q = c["q"]
    if c["unloads_since"] == 0:
        return None, None
    moved = c["moved_since"] / q.final_bound_rate if q.final_bound_rate > 0 else None
    unloads = c["unloads_since"] / q.final_bound_unloads if q.final_bound_unloads > 0 else None
    return moved, unloads


def equal_balance_claim(by: dict[tuple[str, str], dict[str, Any]], scenarios: list[str]) -> str:
    """The costs compared at the balance each run reached: ours no further above the least than
    the baseline's, in every scenario (1% tolerance, as everywhere)."""
    worse = []
    for name in scenarios:
        o, b = by.get((name, OURS)), by.get((name, BASE))
        if not (o and b):
            continue
        for what, x, y in zip(
            ("moved / least", "unloads / least"), cost_ratios(o), cost_ratios(b), strict=True
        ):
            if x is not None and y is not None and compare(x, y) > 0:
                worse.append(f"{name} {what} {fmt(x)} against {fmt(y)}")
    verdict = "PASS" if not worse else "FAIL"
    detail = "none worse" if not worse else "worse: " + "; ".join(worse)
    return (
        f"- {verdict}: costs at the balance each run reached (moves since the last disturbance divided by"
        f" the least that balance needs, table below) no higher than {BASE}'s in any scenario: {detail}"
    )


def efficiency(by: dict[tuple[str, str], dict[str, Any]], scenarios: list[str]) -> list[str]:
    """Costs at equal balance: each run's moves against the least any strategy must move, from the
    same state, to end as balanced as that run did."""
    lines = [
        "**Costs against the least cost of the balance reached.** *least* = the fewest msg/s and bundles"
        " that must move, from the run's last disturbance (traffic frozen there), to end at the run's own"
        " final msg-rate max/min (`balancer/sim/bounds.py`; a lower bound, any bundle to any broker)."
        " A run that ends less balanced has a smaller least; *moved / least* compares the two runs at"
        " the balance each reached. *from cycle* = the last disturbance (the last broker joining or"
        " leaving; `rolling_restart` restarts brokers until late in the run): moves and unloads here count"
        " from it on, so they can be fewer than in the main table.",
        "",
        "| scenario | strategy | from cycle | rate max/min | moved msg/s | least msg/s | moved / least"
        " | unloads | least unloads | unloads / least |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in scenarios:
        for label in (BASE, OURS):
            c = by.get((name, label))
            if c is None:
                continue
            q = c["q"]
            moved, unloads = c["moved_since"], c["unloads_since"]
            ratio, per = cost_ratios(c)
            lines.append(
                f"| {name} | {label} | {c['since']} | {fmt(q.final_rate_ratio)} | {fmt(moved)} |"
                f" {fmt(q.final_bound_rate)} | {fmt(ratio)} | {fmt(unloads)} |"
                f" {fmt(q.final_bound_unloads)} | {fmt(per)} |"
            )
    return lines


def pair_values(
    o: dict[str, Any], b: dict[str, Any], name: str, k: str, seeds: dict[tuple[str, str], Any]
) -> tuple[Any, Any]:
    """What ours and the baseline are compared on: seed means for final-state metrics where
    measured, else the main seed's values."""
    if (name, k) in seeds:
        _, _, mean_o, mean_b = seeds[(name, k)]
        return mean_o, mean_b
    return getattr(o["q"], k), getattr(b["q"], k)
