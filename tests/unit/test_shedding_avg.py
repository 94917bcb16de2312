"""AvgShedder: per-broker hit counters (the seed's 80/80/20 example), pairing, budgets, placement."""

from __future__ import annotations

import random
import zlib

from balancer.config import LoadBalancerConfig
from balancer.models import BundleData, LoadData
from balancer.shedding.avg import AvgShedder
from tests.unit.shedding_util import broker, bundle, cluster

CONF = LoadBalancerConfig(maxUnloadPercentage=0.5)
HOT = [f"hot-{i}" for i in range(10)]


def _three(cpu1: float, cpu2: float, cpu3: float = 20.0) -> LoadData:
    return cluster(
        {
            "broker1": broker(cpu=cpu1, rate=20000, bundles=[f"b1-{i}" for i in range(10)]),
            "broker2": broker(cpu=cpu2, rate=20000, bundles=[f"b2-{i}" for i in range(10)]),
            "broker3": broker(cpu=cpu3, rate=2000, bundles=[]),
        },
        {f"b{k}-{i}": bundle(rate=2000) for k in (1, 2) for i in range(10)},
    )


def test_seed_example_80_80_20_alternating_partners_still_trigger() -> None:
    # broker1 and broker2 take turns as broker3's partner; per-pair counting would never reach 3,
    # per-broker counting reaches 3 for broker3 on the third call.
    conf = CONF.with_updates({"loadBalancerAvgShedderHitCountHighThreshold": 3})
    shedder = AvgShedder()
    first = shedder.find_bundles_for_unloading(_three(81, 80), conf)
    assert first.count == 0
    assert (shedder.high, first.brokers["broker2"].reason) == ({"broker3": 1, "broker1": 1}, "unpaired")
    second = shedder.find_bundles_for_unloading(_three(80, 81), conf)
    assert second.count == 0
    assert shedder.high == {"broker3": 2, "broker2": 1}
    third = shedder.find_bundles_for_unloading(_three(81, 80), conf)
    # (20000 - 2000) * 0.5 = 9000 msg/s: four 2000 msg/s bundles fit, all bound to broker3.
    assert list(third.unloads) == ["broker1"]
    assert third.count == 4
    assert set(third.destinations.values()) == {"broker3"}
    assert "broker3" not in shedder.high and "broker3" not in shedder.low


def test_low_zone_needs_hit_count_low_calls() -> None:
    shedder = AvgShedder()
    counts = [shedder.find_bundles_for_unloading(_three(50, 35, 30), CONF).count for _ in range(8)]
    # gap 20 is in the low zone [15, 40): the 8th consecutive call triggers.
    assert counts == [0] * 7 + [counts[7]]
    assert counts[7] > 0


def test_gap_exactly_40_is_high_zone_but_float32_70_minus_30_is_not() -> None:
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(_three(80, 60, 40), CONF)
    assert shedder.high == {"broker3": 1, "broker1": 1}
    # 70 % reads 70.0 but 30 % reads 30.0000019 in float32: the gap is just under 40.
    other = AvgShedder()
    result = other.find_bundles_for_unloading(_three(70, 50, 30), CONF)
    assert result.brokers["broker1"].numbers["gap"] < 40
    assert other.high == {} and other.low == {"broker3": 1, "broker1": 1}


def test_call_without_pairs_clears_every_counter() -> None:
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(_three(80, 50), CONF)
    assert shedder.low
    shedder.find_bundles_for_unloading(_three(22, 21), CONF)
    assert shedder.low == {} and shedder.high == {}


def test_traffic_below_both_minimums_skips_the_pair_and_resets_it() -> None:
    load = cluster(
        {"a": broker(cpu=90, rate=1500, tp=1000, bundles=["x", "y"]), "b": broker(cpu=10, rate=0)},
        {"x": bundle(rate=750), "y": bundle(rate=750)},
    )
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(load, CONF)
    result = shedder.find_bundles_for_unloading(load, CONF)
    assert result.count == 0
    assert result.brokers["a"].reason == "below_min_unload"  # 750 msg/s is not > 1000
    assert shedder.high == {}


def test_throughput_used_when_msg_rate_gap_too_small_and_single_bundle_not_protected() -> None:
    mb = 1024 * 1024
    load = cluster(
        {"a": broker(cpu=90, rate=100, tp=100 * mb, bundles=["solo"]), "b": broker(cpu=10, rate=100)},
        {"solo": bundle(rate=100, tp=40 * mb)},
    )
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(load, CONF)
    result = shedder.find_bundles_for_unloading(load, CONF)
    assert result.unloads == {"a": ["solo"]}
    assert result.brokers["a"].numbers["metric"] == "throughput"
    assert result.destinations == {"solo": "b"}


def test_zero_traffic_bundles_are_never_picked() -> None:
    load = cluster(
        {"a": broker(cpu=90, rate=10000, bundles=["busy", "idle"]), "b": broker(cpu=10)},
        {"busy": bundle(rate=4000), "idle": bundle()},
    )
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(load, CONF)
    assert shedder.find_bundles_for_unloading(load, CONF).unloads == {"a": ["busy"]}


def test_empty_one_broker_and_bundleless_clusters() -> None:
    assert AvgShedder().find_bundles_for_unloading(cluster({}), CONF).count == 0
    shedder = AvgShedder()
    one = cluster({"a": broker(cpu=90, rate=10000, bundles=["x"])}, {"x": bundle(rate=100)})
    assert shedder.find_bundles_for_unloading(one, CONF).summary.reason == "no_pairs"
    bare = cluster({"a": broker(cpu=90, rate=10000), "b": broker(cpu=10)})
    shedder.find_bundles_for_unloading(bare, CONF)
    result = shedder.find_bundles_for_unloading(bare, CONF)
    assert result.count == 0 and result.brokers["a"].numbers["candidates"] == 0


def test_placement_returns_the_bound_destination_while_it_is_a_candidate() -> None:
    conf = CONF.with_updates({"loadBalancerAvgShedderHitCountHighThreshold": 1})
    shedder = AvgShedder()
    result = shedder.find_bundles_for_unloading(_three(80, 50), conf)
    moved = result.bundles()[0][1]
    load = _three(80, 50)
    choice = shedder.select_broker(["broker2", "broker3"], moved, BundleData(), load, conf, random.Random(1))
    assert choice.broker == "broker3" and choice.explanation.reason == "planned_destination"
    fallback = shedder.select_broker(
        ["broker2", "broker1"], moved, BundleData(), load, conf, random.Random(7)
    )
    assert fallback.explanation.reason == "hashed_random"
    draw = random.Random(7).randint(-(2**31), 2**31 - 1)
    expected = sorted(["broker2", "broker1"])[zlib.crc32(str(draw).encode()) % 2]
    assert fallback.broker == expected


def test_placement_without_candidates_and_departed_brokers() -> None:
    shedder = AvgShedder()
    assert shedder.select_broker([], "ns/x", BundleData(), cluster({}), CONF, random.Random(0)).broker is None
    shedder.find_bundles_for_unloading(_three(80, 50), CONF)
    shedder.on_active_brokers_change({"broker1"})
    assert set(shedder.low) <= {"broker1"} and set(shedder.high) <= {"broker1"}
