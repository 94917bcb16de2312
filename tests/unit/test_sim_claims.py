"""The claims BENCHMARKS.md makes for BalancedShedder, on small versions of the scenarios
(ratios and counts only, never times)."""

from __future__ import annotations

from balancer.sim.engine import PAIRS, simulate
from balancer.sim.metrics import Quality, quality
from service.commands.scenario_files import load_scenario

OURS, AVG = PAIRS["BalancedShedder"], PAIRS["AvgShedder"]


def run(name: str, label: str = "BalancedShedder", scale: float = 1.0, cycles: int | None = None) -> Quality:
    s = load_scenario(name, scale=scale, cycles=cycles)
    pair = PAIRS[label]
    base = simulate(s, pair, 1, with_jitter=False) if any(e.get("jitter") for e in s.events) else None
    return quality(simulate(s, pair, 1), base)


def test_no_unloads_under_periodic_jitter() -> None:
    q = run("periodic_jitter", scale=0.5, cycles=24)
    assert q.jitter_unloads == 0
    assert q.unloads == 0


def test_no_unloads_under_transient_cpu_spikes() -> None:
    q = run("cpu_spike", scale=0.5, cycles=25)
    assert q.jitter_unloads == 0
    assert q.unloads == 0


def test_scale_out_balanced_within_three_cycles_moving_little_more_than_the_bound() -> None:
    q = run("scale_out", scale=0.1, cycles=7)
    assert q.cycles_to_balanced is not None and q.cycles_to_balanced <= 3
    assert q.final_rate_ratio <= 1.25
    assert q.moved_vs_lower_bound is not None and q.moved_vs_lower_bound <= 1.3
    assert q.uphill_moves == 0


def test_heterogeneous_hardware_balances_by_utilisation_and_never_moves_uphill() -> None:
    ours = run("heterogeneous", scale=0.5, cycles=14)
    avg = run("heterogeneous", "AvgShedder", scale=0.5, cycles=14)
    assert ours.uphill_moves == 0
    assert ours.cycles_to_balanced is not None
    assert ours.final_cpu_range < avg.final_cpu_range / 2
    assert ours.final_rate_ratio < avg.final_rate_ratio


def test_two_speed_seed_case_is_fixed_where_avgshedder_does_nothing() -> None:
    ours, avg = run("seed_two_speed", cycles=14), run("seed_two_speed", "AvgShedder", cycles=14)
    assert avg.cycles_to_balanced is None
    assert ours.cycles_to_balanced is not None
    assert ours.final_cpu_range < avg.final_cpu_range
    assert ours.uphill_moves == 0


def test_nearly_idle_broker_is_not_mistaken_for_weak_hardware() -> None:
    # Seed 2 of the 90/10 case: the idle broker's background CPU once made it look ~40% weaker,
    # so it was filled only to the edge of the band (CPU range ~14 points for ever).
    s = load_scenario("seed_90_10", cycles=8)
    q = quality(simulate(s, OURS, 2))
    assert q.final_cpu_range < 5
    assert q.final_rate_ratio <= 1.25


def test_costs_at_the_balance_reached_are_no_further_above_the_least_than_avgshedders() -> None:
    # Raw costs favour a strategy that stops early; compare each run with the least any strategy
    # must move to end as balanced as that run did (balancer/sim/bounds.py).
    for name, cycles in (
        ("hot_bundle", 30),
        ("heterogeneous", 14),
        ("seed_80_80_20", 10),
        ("steady_noise", 20),
    ):
        ours, avg = run(name, cycles=cycles), run(name, "AvgShedder", cycles=cycles)
        assert ours.final_rate_ratio <= avg.final_rate_ratio + 0.01, name
        assert ours.final_bound_rate > 0 and ours.final_bound_unloads > 0, name
        ours_moved = ours.moved_rate / ours.final_bound_rate
        ours_unloads = ours.unloads / ours.final_bound_unloads
        if avg.final_bound_rate > 0:
            assert ours_moved <= 1.01 * avg.moved_rate / avg.final_bound_rate, name
        if avg.final_bound_unloads > 0:
            assert ours_unloads <= 1.01 * avg.unloads / avg.final_bound_unloads, name


def test_brokers_a_partial_move_leaves_out_of_band_keep_their_counters() -> None:
    # Seeds 4 and 18 of a 100-broker large_cluster: a few brokers were touched by a small early move
    # (one triggered broker's worth), settled through the big rebalance a cycle later and, with their
    # counters reset, stayed ~14 points off the target (msg-rate max/min 1.43 / 1.57 after 12 cycles).
    # Since shedding weighs bundles by the latest report, seed 18 sits at 1.25 +- 0.01 from cycle 10 and
    # first dips below it at cycle 13, so this checks the level reached rather than that exact crossing.
    for seed in (4, 18):
        s = load_scenario("large_cluster", scale=0.1, cycles=12)
        q = quality(simulate(s, OURS, seed))
        assert q.final_rate_ratio <= 1.3, seed
        assert q.uphill_moves == 0
