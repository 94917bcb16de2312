"""UniformLoadShedder: the seeds' 50K/30K and 450MB/100MB examples, strict thresholds, int budgets."""

from __future__ import annotations

import pytest

from balancer.config import LoadBalancerConfig
from balancer.shedding.uniform import UniformLoadShedder
from tests.unit.shedding_util import MB, broker, bundle, cluster


def test_50k_vs_30k_msg_rate_is_a_66_percent_difference() -> None:
    rates = {"r20k": 20000, "r15k": 15000, "r8k": 8000, "r3k": 3000, "r2500": 2500, "r1500": 1500}
    load = cluster(
        {"broker1": broker(rate=50000, bundles=rates), "broker2": broker(rate=30000, bundles=["q"])},
        {**{n: bundle(rate=v) for n, v in rates.items()}, "q": bundle(rate=30000)},
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.summary.numbers["msgRateDifferencePercent"] == pytest.approx(66.667, abs=1e-3)
    # Budget int((50000 - 30000) * 0.2) = 4000: only the 3000 msg/s bundle fits (1000 left, 1500 > 1000).
    assert result.brokers["broker1"].numbers["required"] == 4000
    assert result.unloads == {"broker1": ["r3k"]}
    assert result.decisions[0].numbers["remainingBefore"] == 4000


def test_45k_vs_30k_is_exactly_50_percent_and_not_shed() -> None:
    load = cluster(
        {"broker1": broker(rate=45000, bundles=["a", "b"]), "broker2": broker(rate=30000, bundles=["q"])},
        {"a": bundle(rate=1000), "b": bundle(rate=44000), "q": bundle(rate=30000)},
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.count == 0
    assert result.summary.reason == "balanced"


def test_450mb_vs_100mb_is_4_5_times_and_sheds_by_throughput() -> None:
    sizes = {"t200": 200 * MB, "t100": 100 * MB, "t60": 60 * MB, "t50": 50 * MB, "t40": 40 * MB}
    load = cluster(
        {
            "broker1": broker(rate=1000, tp=450 * MB, bundles=sizes),
            "broker2": broker(rate=1000, tp=100 * MB, bundles=["q"]),
        },
        {**{n: bundle(rate=200, tp=v) for n, v in sizes.items()}, "q": bundle(tp=100 * MB)},
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.summary.numbers["throughputRatio"] == pytest.approx(4.5)
    # Budget int(350 MB * 0.2) = 70 MB: 60 MB fits, then nothing fits the 10 MB left.
    assert result.brokers["broker1"].numbers["metric"] == "throughput"
    assert result.unloads == {"broker1": ["t60"]}


def test_400mb_vs_100mb_is_exactly_4_times_and_not_shed() -> None:
    load = cluster(
        {"b1": broker(tp=400 * MB, bundles=["a", "b"]), "b2": broker(tp=100 * MB)},
        {"a": bundle(tp=200 * MB), "b": bundle(tp=200 * MB)},
    )
    assert UniformLoadShedder().find_bundles_for_unloading(load, LoadBalancerConfig()).count == 0


def test_budget_subtracts_truncated_bundle_values() -> None:
    # An idle minimum reads as 1.0: budget int((10000 - 1) * 0.5) = 4999. Subtracting int(2499.9)
    # leaves 2500, so the second 2499.9 still fits (with exact doubles 2499.1 would not).
    conf = LoadBalancerConfig(maxUnloadPercentage=0.5, minUnloadMessage=0)
    load = cluster(
        {"a": broker(rate=10000, bundles=["x", "y"]), "b": broker(rate=0)},
        {"x": bundle(rate=2499.9), "y": bundle(rate=2499.9)},
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, conf)
    assert result.brokers["a"].numbers["required"] == 4999
    assert result.count == 2
    assert result.brokers["a"].numbers["remaining"] == 4999 - 2499 - 2499


def test_cap_limits_bundles_per_call() -> None:
    conf = LoadBalancerConfig(maxUnloadBundleNumPerShedding=2, minUnloadMessage=0)
    names = [f"z{i}" for i in range(6)]
    load = cluster(
        {"a": broker(rate=10000, bundles=names), "b": broker()}, {n: bundle(rate=10) for n in names}
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, conf)
    assert result.count == 2
    assert result.brokers["a"].numbers["skippedByCap"] == 4


def test_zero_traffic_bundles_of_the_source_always_fit() -> None:
    conf = LoadBalancerConfig(minUnloadMessage=0)
    names = ["busy", "idle1", "idle2"]
    load = cluster(
        {"a": broker(rate=10000, bundles=names), "b": broker()},
        {"busy": bundle(rate=10000), "idle1": bundle(), "idle2": bundle()},
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, conf)
    assert sorted(result.unloads["a"]) == ["idle1", "idle2"]


def test_no_fallback_when_busiest_broker_owns_one_bundle() -> None:
    load = cluster(
        {
            "a": broker(rate=50000, bundles=["solo"]),
            "b": broker(rate=40000, bundles=["x", "y"]),
            "c": broker(rate=1000),
        },
        {"solo": bundle(rate=50000), "x": bundle(rate=1000), "y": bundle(rate=1000)},
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.count == 0
    assert result.brokers["a"].reason == "single_bundle"


def test_budget_below_minimum_is_skipped() -> None:
    load = cluster(
        {"a": broker(rate=4000, bundles=["x", "y"]), "b": broker(rate=100)},
        {"x": bundle(rate=100), "y": bundle(rate=100)},
    )
    result = UniformLoadShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.count == 0
    assert result.brokers["a"].reason == "below_min_unload"  # int(3900 * 0.2) = 780 < 1000


def test_empty_one_broker_and_idle_clusters() -> None:
    conf = LoadBalancerConfig()
    assert UniformLoadShedder().find_bundles_for_unloading(cluster({}), conf).count == 0
    one = cluster({"a": broker(rate=9000, bundles=["x", "y"])}, {"x": bundle(rate=10), "y": bundle(rate=10)})
    assert UniformLoadShedder().find_bundles_for_unloading(one, conf).count == 0
    idle = cluster({"a": broker(bundles=["x", "y"]), "b": broker()}, {"x": bundle(), "y": bundle()})
    result = UniformLoadShedder().find_bundles_for_unloading(idle, conf)
    assert result.count == 0
    assert result.summary.numbers["msgRateDifferencePercent"] == -100
