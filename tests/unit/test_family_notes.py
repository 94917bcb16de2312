"""The judgements reported beside the family claims: balance on load rather than msg rate, and uphill
moves at the bundles' expected traffic."""

from __future__ import annotations

from typing import Any

import pytest

from balancer.sim.engine import PAIRS, CycleState, simulate
from balancer.sim.families import instance_dict
from balancer.sim.family_claims import load_ratio, notes, run_row
from balancer.sim.metrics import rate_ratio
from balancer.sim.model import CPU_POINTS_PER_BYTE, CPU_POINTS_PER_MSG
from balancer.sim.scenarios import parse_scenario


def state(rates: list[float], sizes: list[float], capacity: list[float]) -> CycleState:
    n = len(rates)
    return CycleState(
        cycle=0,
        brokers=[f"b{i}" for i in range(n)],
        capacity=capacity,
        util=[0.0] * n,
        msg_rate=rates,
        throughput=[r * s for r, s in zip(rates, sizes, strict=True)],
        unloads=0,
        placements=0,
    )


def test_load_ratio_weighs_message_sizes_as_cpu_does() -> None:
    # Equal CPU for 2048-byte messages at a lower msg rate: balanced on load, not on msg rate.
    per_msg = {s: CPU_POINTS_PER_MSG + s * CPU_POINTS_PER_BYTE for s in (512.0, 2048.0)}
    slow = 1000.0 * per_msg[512.0] / per_msg[2048.0]
    s = state([1000.0, slow], [512.0, 2048.0], [1.0, 1.0])
    assert load_ratio(s) == pytest.approx(1.0)
    assert rate_ratio(s) == pytest.approx(1000.0 / slow) and rate_ratio(s) > 1.2
    # Capacity scales it as it does msg rate.
    assert load_ratio(state([2000.0, 1000.0], [512.0, 512.0], [2.0, 1.0])) == pytest.approx(1.0)


def row(family: str, i: int, strategy: str, **kw: float) -> dict[str, object]:
    base = {"family": family, "instance": i, "strategy": strategy, "unloads": 0, "unload_cost": None}
    return {**base, "balance": 1.1, "load_balance": 1.1, "uphill": 0, "uphill_expected": 0, **kw}


def test_notes_count_what_the_claims_do_on_the_other_measure() -> None:
    rows = [
        row("heterogeneous", 0, "BalancedShedder", balance=1.3, load_balance=1.2),
        row("heterogeneous", 1, "BalancedShedder", balance=1.2, load_balance=1.3),
        row("heterogeneous", 2, "BalancedShedder", uphill=2, uphill_expected=1),
        row("heterogeneous", 0, "AvgShedder", balance=1.2, load_balance=1.21),
        row("heterogeneous", 1, "AvgShedder", balance=1.2, load_balance=1.2),
        row("heterogeneous", 2, "AvgShedder", load_balance=1.05),
    ]
    text = notes(rows)
    assert "in 1 of 3 instances: heterogeneous#2 1" in text[0]
    assert "on load in 2/3 (on msg rate 2/3)" in text[1]
    # Both balance on load in #0 (ours better) and #2 (ours worse): 1 of 2.
    assert "in 1/2 instances" in text[2]


def test_cost_on_load_equals_cost_on_msg_rate_when_every_message_is_the_same_size() -> None:
    # Load is then msg rate times a constant: the same moves, the same least, the same ratio.
    d = instance_dict("skewed_sizes", 3)
    d["msg_size_range"] = (1024.0, 1024.0)
    r = run_row("skewed_sizes", 3, simulate(parse_scenario(d), PAIRS["BalancedShedder"], 3))
    assert r["cost"] is not None and r["cost_load"] == pytest.approx(r["cost"])
    # With the family's mixed sizes the two differ.
    mixed = run_row(
        "skewed_sizes",
        3,
        simulate(parse_scenario(instance_dict("skewed_sizes", 3)), PAIRS["BalancedShedder"], 3),
    )
    assert mixed["cost"] is not None and mixed["cost_load"] != pytest.approx(mixed["cost"])


def test_comparison_misses_are_broken_down_by_family_and_cause() -> None:
    from balancer.sim.family_claims import _misses

    def row(family: str, balance: float, unloads: int, unload_cost: float | None) -> dict[str, Any]:
        return {"family": family, "balance": balance, "unloads": unloads, "unload_cost": unload_cost}

    hot, scale_in = "hot_bundles", "scale_in"
    both = [
        (row(hot, 1.10, 9, 3.0), row(hot, 1.20, 4, 1.0)),  # more unloads than its balance needs
        (row(scale_in, 1.24, 0, None), row(scale_in, 1.10, 0, None)),  # less balanced
        (row(scale_in, 1.10, 2, 1.0), row(scale_in, 1.10, 3, 1.0)),  # not a miss
        (row(hot, 1.10, 9, 1.0), row(hot, 1.20, 4, 1.0)),  # more unloads, but as near its fewest
    ]
    assert _misses(both) == (
        "hot_bundles 1 (0 less balanced, 1 more unloads), scale_in 1 (1 less balanced, 0 more unloads)"
    )
    assert _misses(both[2:]) == "none"
