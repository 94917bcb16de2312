"""BalancedShedder on hand-made load data: triggering, jitter immunity, direction of moves, placement."""

from __future__ import annotations

import random

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    ResourceUsage,
    TimeAverageMessageData,
)
from balancer.placement.registry import create_placement
from balancer.shedding.balanced import DRIFT_CALLS, BalancedShedder
from balancer.shedding.base import SheddingResult
from balancer.shedding.capacity import View
from balancer.shedding.registry import create_shedder
from balancer.shedding.selection import ResultBuilder
from balancer.shedding.water_fill import reach_of, water_fill

CONFIG = LoadBalancerConfig()


def window(rate: float, n: int) -> TimeAverageMessageData:
    return TimeAverageMessageData(
        max_samples=n,
        num_samples=n,
        msg_rate_in=rate / 2,
        msg_rate_out=rate / 2,
        msg_throughput_in=rate * 512,
        msg_throughput_out=rate * 512,
    )


def cluster(brokers: dict[str, tuple[float, list[float]]]) -> LoadData:
    """broker -> (cpu percent, bundle msg rates); each bundle's messages are 1 KiB."""
    load = LoadData()
    for name, (cpu, rates) in brokers.items():
        local = LocalBrokerData(cpu=ResourceUsage(usage=cpu, limit=100.0))
        for i, r in enumerate(rates):
            bundle = f"t/{name}/0x{i:08x}_0x{i + 1:08x}"
            local.bundles.add(bundle)
            load.bundle_data[bundle] = BundleData(
                short_term_data=window(r, 10), long_term_data=window(r, 1000)
            )
        local.msg_rate_in = local.msg_rate_out = sum(rates) / 2
        local.msg_throughput_in = local.msg_throughput_out = sum(rates) * 512
        load.broker_data[name] = BrokerData(local_data=local)
    return load


def test_registries_accept_the_name_and_share_one_object() -> None:
    shedder = create_shedder("BalancedShedder")
    assert isinstance(shedder, BalancedShedder)
    assert create_placement("BalancedShedder", shedder) is shedder
    with pytest.raises(InvalidInput):
        create_placement("BalancedShedder", create_shedder("AvgShedder"))


def test_empty_broker_fills_after_two_confirmed_hits_with_moves_downhill_only() -> None:
    # The fast path alone, without the join rule (its own tests: test_join_rule.py).
    config = CONFIG.with_updates({"loadBalancerBalancedShedderUnderloadedMultiplier": 0.0})
    s = BalancedShedder()
    load = cluster(
        {
            "a": (60.0, [1000.0] * 20),
            "b": (62.0, [1000.0] * 20),
            "c": (2.0, []),
            "d": (3.0, []),
        }
    )
    first = s.find_bundles_for_unloading(load, config)
    assert first.count == 0  # one hit is not enough, even for a large gap
    second = s.find_bundles_for_unloading(load, config)
    assert second.count > 0
    assert set(second.unloads) == {"a", "b"}
    assert set(second.destinations.values()) == {"c", "d"}
    moved = {b: sum(1 for d in second.destinations.values() if d == b) for b in ("c", "d")}
    # Two sources of 20 bundles and two empty brokers: about half of everything moves, evenly.
    assert 16 <= sum(moved.values()) <= 24
    assert abs(moved["c"] - moved["d"]) <= 2
    for d in second.decisions:
        assert d.numbers["sourceUtil"] > load.broker_data[d.numbers["destination"]].local_data.cpu.usage


def test_cpu_spike_without_traffic_change_waits_for_the_slow_count() -> None:
    s = BalancedShedder()
    calm = {n: (40.0, [1000.0] * 20) for n in "abcd"}
    for _ in range(3):
        assert s.find_bundles_for_unloading(cluster(calm), CONFIG).count == 0
    spiked = dict(calm, a=(95.0, [1000.0] * 20))  # another process: usage up, traffic unchanged
    counts = [s.find_bundles_for_unloading(cluster(spiked), CONFIG).count for _ in range(7)]
    assert counts == [0] * 7  # hit count low threshold is 8
    assert s.find_bundles_for_unloading(cluster(spiked), CONFIG).count > 0  # a lasting load is shed


def test_jitter_that_flips_sides_never_accumulates_hits() -> None:
    s = BalancedShedder()
    for i in range(20):
        low = i % 2 == 0
        load = cluster(
            {
                "a": (15.0 if low else 65.0, [400.0 if low else 1600.0] * 20),
                "b": (40.0, [1000.0] * 20),
                "c": (40.0, [1000.0] * 20),
            }
        )
        assert s.find_bundles_for_unloading(load, CONFIG).count == 0


def edge_cluster(cpu_a: float) -> LoadData:
    """Broker a's traffic follows its CPU (same hardware as the others); b, c, d at 40%."""
    others = {n: (40.0, [1000.0] * 20) for n in "bcd"}
    return cluster({"a": (cpu_a, [cpu_a * 25.0] * 20), **others})


def test_a_broker_at_the_band_edge_triggers_by_slow_drift() -> None:
    # a alternates 51% / 49% against three at 40%: its gap (8.25 / 6.75 points) crosses the band
    # (7.5) every call, so the hit counter never passes 1, but it stays beyond half the band.
    s = BalancedShedder()
    need = 2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    for i in range(need - 1):
        r = s.find_bundles_for_unloading(edge_cluster(51.0 if i % 2 == 0 else 49.0), CONFIG)
        assert r.count == 0, i
        assert abs(r.brokers["a"].numbers["hits"]) <= 1
    r = s.find_bundles_for_unloading(edge_cluster(51.0 if need % 2 == 1 else 49.0), CONFIG)
    assert r.count > 0
    assert set(r.unloads) == {"a"}
    assert r.brokers["a"].reason == "triggered"
    assert "slow drift" in r.brokers["a"].message
    assert r.brokers["a"].numbers["drift"] == need


def test_a_broker_within_the_drift_edge_never_triggers() -> None:
    s = BalancedShedder()
    for _ in range(40):  # gap 2.25 points at a 40.75% target: inside 7% of the target
        r = s.find_bundles_for_unloading(edge_cluster(43.0), CONFIG)
        assert r.count == 0
        assert r.brokers["a"].reason == "in_band"
        assert r.brokers["a"].numbers["drift"] == 0


def test_a_destination_the_fill_leaves_beyond_the_drift_edge_keeps_counting() -> None:
    # Target 50: a (57.8) triggers after HitCountLow calls; three brokers at 53.6 taking no part (inside
    # the drift edge, 3.75, so they do not join a's plan) set where it stops, so it sheds about 4 points
    # over three brokers 6.2 under, each of which is still more than the edge under afterwards: they go
    # on counting instead of starting again.
    spec = {"a": 57.8, **{f"o{i}": 53.6 for i in range(3)}, **{f"d{i}": 43.8 for i in range(3)}}
    load = cluster({n: (u, [u / 4] * 100) for n, u in spec.items()})
    s = BalancedShedder()
    # The fill's rule: the least-move planner (issue 31) also takes from the brokers at 54.7 and fills
    # the destinations to within the edge, so it is off here.
    s.exact = False
    for _ in range(CONFIG.loadBalancerAvgShedderHitCountLowThreshold):
        r = s.find_bundles_for_unloading(load, CONFIG)
    assert set(r.unloads) == {"a"}
    filled = set(r.destinations.values())
    assert filled and all(d.startswith("d") for d in filled)
    counted = {d: r.brokers[d].numbers["drift"] for d in filled}
    assert all(n < -1 for n in counted.values())
    assert s.find_bundles_for_unloading(load, CONFIG).brokers[next(iter(filled))].reason == "settling"
    r = s.find_bundles_for_unloading(load, CONFIG)
    assert {d: r.brokers[d].numbers["drift"] for d in filled} == {d: n - 1 for d, n in counted.items()}


def test_placement_prefers_least_projected_utilisation_and_counts_what_it_placed() -> None:
    s = BalancedShedder()
    load = cluster({"a": (50.0, [1000.0] * 20), "b": (40.0, [800.0] * 20), "c": (45.0, [900.0] * 20)})
    s.find_bundles_for_unloading(load, CONFIG)
    big = BundleData(short_term_data=window(8000.0, 10), long_term_data=window(8000.0, 1000))
    rng = random.Random(1)
    first = s.select_broker(["a", "b", "c"], "t/new/0x0_0x1", big, load, CONFIG, rng)
    assert first.broker == "b"
    # b now carries the big bundle in projection, so the next one goes to c.
    second = s.select_broker(["a", "b", "c"], "t/new/0x1_0x2", big, load, CONFIG, rng)
    assert second.broker == "c"


def test_only_ordinary_owned_bundles_with_data_move_and_equal_weights_go_by_name() -> None:
    s = BalancedShedder()
    load = cluster({"a": (60.0, [1000.0] * 6), "b": (60.0, [1000.0] * 6), "c": (2.0, [])})
    local = load.broker_data["a"].local_data
    # Heavier than any ordinary bundle yet within what a source may give: the first pick if allowed.
    big = BundleData(short_term_data=window(1500.0, 10), long_term_data=window(1500.0, 1000))
    protected = [
        "pulsar/system/0x00000000_0xffffffff",  # system namespace
        "pulsar/standalone/localhost:8080/0x00000000_0xffffffff",  # heartbeat
        "sla-monitor/standalone/localhost:8080/0x00000000_0xffffffff",  # SLA monitor
        "t/recent/0x00000000_0xffffffff",  # recently unloaded
    ]
    for name in protected:
        local.bundles.add(name)
        load.bundle_data[name] = big
    load.recently_unloaded_bundles["t/recent/0x00000000_0xffffffff"] = 1
    local.bundles.add("t/nodata/0x00000000_0xffffffff")  # owned, but no data yet
    # The fast path's second hit (the join rule would fill c on the first: test_join_rule.py).
    config = CONFIG.with_updates({"loadBalancerBalancedShedderUnderloadedMultiplier": 0.0})
    s.find_bundles_for_unloading(load, config)
    result = s.find_bundles_for_unloading(load, config)
    moved = [b for _, b in result.bundles()]
    assert moved and set(result.unloads) == {"a", "b"}
    assert not set(moved) & {*protected, "t/nodata/0x00000000_0xffffffff"}
    # Every ordinary bundle weighs the same: each source gives up its last names first.
    for source in ("a", "b"):
        ordinary = sorted(f"t/{source}/0x{i:08x}_0x{i + 1:08x}" for i in range(6))
        shed = result.unloads[source]
        assert shed == ordinary[::-1][: len(shed)]


def _fill(
    brokers: dict[str, tuple[float, list[float]]],
    tol: float = 1.0,
    others: tuple[str, ...] = (),
    sides: tuple[bool, bool] = (True, True),
    reach: float | None = None,
) -> tuple[list[str], dict[str, float]]:
    """Water-filling alone on a hand-made view: broker -> (traffic, bundle weights), capacity 1, so
    projected utilisation = traffic and the target is the mean. Returns the moved bundles in order
    and the destinations' projections after them. ``others`` take no part (water_fill's envelope)."""
    load = LoadData()
    for name, (_, weights) in brokers.items():
        local = LocalBrokerData()
        for i, w in enumerate(weights):
            bundle = f"t/{name}/0x{i:08x}_0x{i + 1:08x}"
            local.bundles.add(bundle)
            st = TimeAverageMessageData(max_samples=10, num_samples=10, msg_rate_in=w)
            load.bundle_data[bundle] = BundleData(short_term_data=st, long_term_data=st)
        load.broker_data[name] = BrokerData(local_data=local)
    traffic = {b: t for b, (t, _) in brokers.items()}
    target = sum(traffic.values()) / len(traffic)
    view = View(dict(traffic), traffic, dict.fromkeys(traffic, 1.0), target, target, 1.0, 6 * 1024.0)
    out = ResultBuilder("BalancedShedder")
    sources = [b for b, t in traffic.items() if t > target + tol and b not in others]
    dests = [b for b, t in traffic.items() if t < target - tol and b not in others]
    water_fill(load, view, sources, dests, tol, out, None, list(others), sides, reach=reach, exact=False)
    after = {d.numbers["destination"]: d.numbers["destinationProjected"] for d in out.decisions}
    return [d.subject or "" for d in out.decisions], after


def test_water_filling_stops_once_every_broker_is_within_the_tolerance() -> None:
    # a sheds 9.5 (a 100.5, b 99.5): both within 1 of the target 100, so the 0.4s stay, although
    # one would still fit between the pair.
    moved, after = _fill({"a": (110.0, [9.5, 0.4, 0.4, 99.7]), "b": (90.0, [90.0])})
    assert moved == ["t/a/0x00000000_0x00000001"]
    assert after["b"] == pytest.approx(99.5)


def test_sources_inside_the_tolerance_keep_refilling_a_destination_below_it() -> None:
    # After a 3.5 from each source, a and c sit at 101 (inside the tolerance) but b is at 98, still
    # more than the tolerance below the target: a and c each give a 0.9 more.
    moved, after = _fill(
        {
            "a": (104.5, [3.5, 0.9, 0.3, 99.8]),
            "c": (104.5, [3.5, 0.9, 0.3, 99.8]),
            "b": (91.0, [91.0]),
        }
    )
    assert moved.count("t/a/0x00000001_0x00000002") == 1 and moved.count("t/c/0x00000001_0x00000002") == 1
    assert len(moved) == 4
    assert after["b"] == pytest.approx(99.8)


def test_a_triggered_source_comes_down_only_to_the_highest_broker_taking_no_part() -> None:
    # Target 100; x sits at 104 and did not trigger, so the cluster's max stays 104 whatever a does:
    # a (114) sheds five 2s to 104, not seven to the target, though b and c are still below it.
    brokers = {
        "a": (114.0, [2.0] * 7 + [100.0]),
        "x": (104.0, [104.0]),
        "b": (91.0, [91.0]),
        "c": (91.0, [91.0]),
    }
    assert len(_fill(brokers, others=("x",), sides=(True, False))[0]) == 5
    # Without anyone left out the fill goes on to the target's tolerance.
    assert len(_fill(brokers)[0]) == 7


def test_with_a_reach_a_big_bundle_goes_whole_instead_of_many_small_ones() -> None:
    # Target 100; a is 18 over with one 12 and ten 2s, b, c and d 6 under. Within the tolerance no
    # destination has room for the 12, so nine 2s move; with a reach of 7 the 12 goes to b (106) and
    # three 2s finish: four moves, every destination at most 7 above the target.
    brokers = {
        "a": (118.0, [12.0] + [2.0] * 10 + [84.0]),
        "b": (94.0, [94.0]),
        "c": (94.0, [94.0]),
        "d": (94.0, [94.0]),
    }
    tight, _ = _fill(brokers)
    moved, after = _fill(brokers, reach=7.0)
    assert len(tight) == 9
    assert moved[0] == "t/a/0x00000000_0x00000001" and len(moved) == 4
    assert max(after.values()) <= 107.0


def test_the_reach_is_the_envelopes_top_only_within_one_hardware_class() -> None:
    def view(capacity: dict[str, float]) -> View:
        traffic = {"a": 500.0, "b": 300.0}
        return View(dict.fromkeys(traffic, 40.0), traffic, capacity, 40.0, 40.0, 1.0, 1.0)

    assert reach_of(view({"a": 10.0, "b": 10.0}), 0.94) == pytest.approx(40.0 * 0.15 / 2.15)
    assert reach_of(view({"a": 10.0, "b": 5.0}), 0.94) == 0.94
    # Never inside the tolerance, however low the target.
    assert reach_of(View({"a": 5.0}, {"a": 1.0}, {"a": 1.0}, 1.0, 1.0, 1.0, 1.0), 0.94) == 0.94


def test_the_envelope_is_capped_at_the_balanced_ratio() -> None:
    # x at 130 taking no part would let a stay at 125; the cap (1.15 x the floor 99) takes a lower.
    brokers = {
        "a": (125.0, [2.0] * 13 + [100.0]),
        "x": (130.0, [130.0]),
        "b": (72.5, [72.5]),
        "c": (72.5, [72.5]),
    }
    moved, _ = _fill(brokers, others=("x",), sides=(True, False))
    assert 125.0 - 2.0 * len(moved) <= 1.15 * 99.0 < 125.0 - 2.0 * (len(moved) - 1)


def test_a_triggered_destination_is_filled_only_to_the_lowest_broker_taking_no_part() -> None:
    # Target 100; b triggered at 88, x (not triggered) stays at 95: the untriggered sources a and c
    # give b four 2s (to 96, the first step at or above 95), not six to the target.
    brokers = {
        "a": (108.5, [2.0] * 6 + [96.5]),
        "c": (108.5, [2.0] * 6 + [96.5]),
        "x": (95.0, [95.0]),
        "b": (88.0, [88.0]),
    }
    moved, after = _fill(brokers, others=("x",), sides=(False, True))
    assert after["b"] >= 95.0 > after["b"] - 2.0
    full, _ = _fill(brokers)
    assert len(moved) < len(full)


def parked(calls: int, off: float = 3.4) -> list[SheddingResult]:
    """a at +off and b at -off points around a 30% target, c and d on it: inside the band and inside
    half of it, so only the slow-drift count can move anything."""
    s = BalancedShedder()
    spec = {"a": 30.0 + off, "b": 30.0 - off, "c": 30.0, "d": 30.0}
    load = cluster({n: (u, [u * 25.0] * 20) for n, u in spec.items()})
    return [s.find_bundles_for_unloading(load, CONFIG) for _ in range(calls)]


def test_brokers_parked_at_opposite_sides_of_the_target_drift_in() -> None:
    # Two brokers 11% of the target off on opposite sides are at max/min 1.26 by traffic: generated
    # heterogeneous clusters ended at 1.26-1.30 with every broker in the band and no drift count
    # above 9.
    need = 2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    results = parked(need)
    assert [r.count for r in results[:-1]] == [0] * (need - 1)
    last = results[-1]
    assert set(last.unloads) == {"a"}
    assert set(last.destinations.values()) == {"b"}
    assert "slow drift" in last.brokers["a"].message


def test_a_jump_out_of_the_band_waits_one_more_report_than_a_broker_off_from_the_start() -> None:
    # A three-interval spike ended in the cycle its third report fired the fast path: a broker that was
    # in band in the call before its run of hits needs a fourth; one off from the start still three.
    calm = {n: (40.0, [1000.0] * 20) for n in "abcd"}
    hot = dict(calm, a=(75.0, [75.0 * 25.0] * 20))  # traffic up with the CPU: confirmed
    jumped = BalancedShedder()
    for _ in range(3):
        assert jumped.find_bundles_for_unloading(cluster(calm), CONFIG).count == 0
    assert [jumped.find_bundles_for_unloading(cluster(hot), CONFIG).count for _ in range(3)] == [0, 0, 0]
    assert set(jumped.find_bundles_for_unloading(cluster(hot), CONFIG).unloads) == {"a"}
    from_start = BalancedShedder()
    assert [from_start.find_bundles_for_unloading(cluster(hot), CONFIG).count for _ in range(2)] == [0, 0]
    assert set(from_start.find_bundles_for_unloading(cluster(hot), CONFIG).unloads) == {"a"}


def test_brokers_within_the_balanced_enough_spread_are_left_alone() -> None:
    # At +-2.6 points around 30% (max/min 1.19 by traffic) the drift count fires as it does at +-3.4,
    # but the cluster is balanced enough: the moves would only spend unloads.
    need = 2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    last = parked(need, off=2.6)[-1]
    assert last.count == 0
    assert last.summary.reason == "balanced_enough" and last.summary.numbers["spread"] <= 1.2
    assert "slow drift" in last.brokers["a"].message


def test_an_overloaded_broker_is_shed_however_small_the_spread() -> None:
    # 91% against five brokers at 79%: max/min 1.15, but past Pulsar's overload threshold (85%).
    spec = {"a": 91.0, **{n: 79.0 for n in "bcdef"}}
    load = cluster({n: (u, [u * 25.0 / 4] * 80) for n, u in spec.items()})  # bundles of ~1.1 points
    s = BalancedShedder()
    calls = CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    results = [s.find_bundles_for_unloading(load, CONFIG) for _ in range(calls)]
    assert [r.count for r in results[:-1]] == [0] * (calls - 1)
    assert set(results[-1].unloads) == {"a"}
    assert all(r.summary.reason != "balanced_enough" for r in results)


def test_a_broker_the_drift_count_fires_below_the_target_is_filled_whatever_its_last_report() -> None:
    # n carries a fifth less traffic than the target for sixteen calls (the slow drift), its CPU
    # noisy around that; in the call it fires, one noisy report puts its CPU a point and a half above
    # the target. It fired because its traffic is under, so it is a destination: counted by its report
    # it was a source with nothing to give, and was left out while a's bundles went elsewhere
    # (generated skewed_sizes #11 ended at 1.19 with the lowest broker untouched).
    spec = {"a": 48.0, "b": 44.0, "c": 40.0, "d": 40.0}
    s = BalancedShedder()
    calls = 2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    for k in range(calls):
        noisy = 45.0 if k == calls - 1 else 33.0 + (2.0 if k % 2 else -2.0)
        load = cluster({**{b: (u, [u / 4] * 100) for b, u in spec.items()}, "n": (noisy, [33.0 / 4] * 100)})
        r = s.find_bundles_for_unloading(load, CONFIG)
    assert r.brokers["n"].numbers["gap"] > 0  # its last report: above the target
    assert r.brokers["n"].reason == "triggered" and r.brokers["n"].numbers["drift"] < 0
    assert "n" not in r.unloads
    assert "n" in set(r.destinations.values())


def test_a_broker_its_traffic_puts_beyond_the_drift_edge_joins_a_plan_another_fired() -> None:
    # a is far over the band and fires on the fast count; b, 5 points over the target (54% against
    # 49%), is inside the band by its report and 16 calls from its slow-drift count, but its traffic
    # is beyond the drift edge (3.7 points): it sheds in a's plan instead of a later one (issue 31:
    # each plan that left one of several hot brokers bought little balance for what it moved). c, a
    # point over, inside the edge, stays out.
    s = BalancedShedder()
    load = cluster(
        {
            "a": (70.0, [1750.0] * 20),
            "b": (54.0, [1350.0] * 20),
            "c": (50.0, [1250.0] * 20),
            **{n: (40.0, [1000.0] * 20) for n in "def"},
        }
    )
    r = _until_unloads(s, load, CONFIG.loadBalancerAvgShedderHitCountHighThreshold + 3)
    assert s.calls < DRIFT_CALLS * CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    assert r.brokers["b"].reason == "in_band" and r.brokers["c"].reason == "in_band"
    assert set(r.unloads) == {"a", "b"}
    assert set(r.destinations.values()) <= {"d", "e", "f"}


def test_a_broker_on_the_target_by_report_but_beyond_the_edge_by_traffic_joins_too() -> None:
    # Capacities learned on a calm cluster (20,000 msg/s at 40%); then b's traffic rises to 30,000
    # while its report stays on the target (46%): by traffic it is 11.7 points over. It sheds in the
    # plan a fires, though by its report it is in the band, which a plan otherwise leaves alone.
    s = BalancedShedder()
    calm = {n: (40.0, [1000.0] * 20) for n in "abcdef"}
    for _ in range(10):
        assert s.find_bundles_for_unloading(cluster(calm), CONFIG).count == 0
    hot = cluster(dict(calm, a=(70.0, [1750.0] * 20), b=(46.0, [1500.0] * 20)))
    r = _until_unloads(s, hot, CONFIG.loadBalancerAvgShedderHitCountHighThreshold + 3)
    assert set(r.unloads) == {"a", "b"}


def _until_unloads(s: BalancedShedder, load: LoadData, calls: int) -> SheddingResult:
    for _ in range(calls):
        r = s.find_bundles_for_unloading(load, CONFIG)
        if r.unloads:
            return r
    raise AssertionError(f"nothing shed in {calls} calls")


def test_the_planner_key_turns_the_least_move_plan_on_and_each_move_says_which_planned_it() -> None:
    # The cluster of the test above: the fill sheds a alone; the least-move planner (issue 31) also
    # takes from the brokers at 53.6 and fills the destinations to within the edge. An operator turns
    # it on with loadBalancerBalancedShedderPlanner, live (a dynamic key), not through a class flag.
    spec = {"a": 57.8, **{f"o{i}": 53.6 for i in range(3)}, **{f"d{i}": 43.8 for i in range(3)}}
    load = cluster({n: (u, [u / 4] * 100) for n, u in spec.items()})
    got: dict[str, SheddingResult] = {}
    for key in ("fill", "leastMove"):
        # A time limit no loaded machine reaches: this test is about which plan, not how fast.
        config = CONFIG.with_updates(
            {
                "loadBalancerBalancedShedderPlanner": key,
                "loadBalancerBalancedShedderPlannerTimeLimitSeconds": 600,
            },
            dynamic_only=True,
        )
        s = BalancedShedder()
        for _ in range(CONFIG.loadBalancerAvgShedderHitCountLowThreshold):
            got[key] = s.find_bundles_for_unloading(load, config)
    assert CONFIG.loadBalancerBalancedShedderPlanner == "leastMove"  # the default
    fill, planned = got["fill"], got["leastMove"]
    assert set(fill.unloads) == {"a"} and "planner" not in fill.summary.numbers
    assert all("planner" not in d.numbers for d in fill.decisions)
    assert set(planned.unloads) > {"a"}, planned.unloads
    assert planned.summary.numbers["planner"] == "least_move"
    assert planned.decisions and all(d.numbers["planner"] == "least_move" for d in planned.decisions)
    # The class-level override the fill's own tests use still wins over the key.
    s = BalancedShedder()
    s.exact = False
    config = CONFIG.with_updates({"loadBalancerBalancedShedderPlanner": "leastMove"})
    for _ in range(CONFIG.loadBalancerAvgShedderHitCountLowThreshold):
        r = s.find_bundles_for_unloading(load, config)
    assert set(r.unloads) == {"a"}
