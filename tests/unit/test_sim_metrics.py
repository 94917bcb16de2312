"""Metric definitions on tiny hand-made runs."""

from __future__ import annotations

import math

from balancer.sim.engine import CycleState, MoveRecord, SimResult, StrategyPair
from balancer.sim.metrics import cpu_range, lower_bound, quality, rate_ratio, tp_ratio


def state(
    cycle: int, rates: list[float], caps: list[float] | None = None, util: list[float] | None = None
) -> CycleState:
    caps = caps or [1.0] * len(rates)
    return CycleState(
        cycle=cycle,
        brokers=[f"b{i}" for i in range(len(rates))],
        capacity=caps,
        util=util or [r / 100 for r in rates],
        msg_rate=rates,
        throughput=[r * 1000 for r in rates],
        unloads=0,
        placements=0,
    )


def result(states: list[CycleState], moves: list[MoveRecord], disturbance: int = 0) -> SimResult:
    return SimResult(
        scenario="t",
        pair=StrategyPair("p", "A", "B"),
        seed=1,
        interval_minutes=1.0,
        disturbance_at=disturbance,
        cycles=states,
        moves=moves,
        placements=0,
        jitter_cycles=set(),
        pre_disturbance=states[disturbance],
    )


def move(cycle: int, rate: float, src_util: float, dst_util: float) -> MoveRecord:
    return MoveRecord(cycle, "x", "b0", "b1", rate, rate * 1000, src_util, dst_util)


def test_ratios_are_normalised_by_capacity() -> None:
    s = state(0, [2000.0, 1000.0], caps=[2.0, 1.0], util=[40.0, 55.0])
    assert rate_ratio(s) == 1.0
    assert tp_ratio(s) == 1.0
    assert cpu_range(s) == 15.0
    assert rate_ratio(state(0, [100.0, 0.0])) == math.inf


def test_lower_bound_is_traffic_above_the_capacity_weighted_mean() -> None:
    # Total 4000 over capacity 4 -> 1000 per unit; the strong broker's share is 2000.
    s = state(0, [3000.0, 1000.0, 0.0], caps=[2.0, 1.0, 1.0])
    assert lower_bound(s) == 1000.0
    assert lower_bound(state(0, [500.0, 500.0])) == 0.0


def test_cycles_to_balanced_counts_from_the_disturbance_inclusive() -> None:
    states = [
        state(0, [100.0, 100.0]),
        state(1, [300.0, 0.0]),
        state(2, [200.0, 120.0]),
        state(3, [160.0, 140.0]),
    ]
    q = quality(result(states, [], disturbance=1))
    assert q.cycles_to_balanced == 3  # cycles 1, 2, 3: balanced first at cycle 3 (160/140 <= 1.25)
    assert q.minutes_to_balanced == 3.0
    never = quality(result([state(0, [300.0, 100.0]), state(1, [300.0, 100.0])], []))
    assert never.cycles_to_balanced is None


def test_moves_lower_bound_ratio_and_uphill() -> None:
    states = [state(0, [300.0, 100.0]), state(1, [200.0, 200.0])]
    moves = [move(0, 60.0, 70.0, 20.0), move(0, 60.0, 30.0, 40.0)]
    q = quality(result(states, moves))
    assert q.unloads == 2
    assert q.moved_rate == 120.0
    assert q.lower_bound_rate == 100.0
    assert q.moved_vs_lower_bound == 1.2
    assert q.uphill_moves == 1
    assert q.final_rate_ratio == 1.0


def test_jitter_unloads_are_the_excess_over_the_run_without_jitter() -> None:
    states = [state(0, [100.0, 100.0])]
    with_jitter = result(states, [move(0, 1.0, 50.0, 40.0)] * 3)
    without = result(states, [move(0, 1.0, 50.0, 40.0)])
    assert quality(with_jitter, without).jitter_unloads == 2
    assert quality(without, with_jitter).jitter_unloads == 0
    assert quality(with_jitter).jitter_unloads is None


def test_later_membership_events_add_the_imbalance_they_create() -> None:
    states = [state(0, [300.0, 100.0]), state(1, [200.0, 200.0]), state(2, [200.0, 200.0])]
    r = result(states, [])
    r.pre_events = [state(2, [400.0, 0.0])]  # a broker came back empty at cycle 2
    assert quality(r).lower_bound_rate == 100.0 + 200.0
