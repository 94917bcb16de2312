"""ThresholdShedder: the seeds' worked examples, history smoothing, lower-boundary shedding, edges."""

from __future__ import annotations

import pytest

from balancer.config import LoadBalancerConfig
from balancer.shedding.threshold import ThresholdShedder
from tests.unit.shedding_util import MB, broker, bundle, cluster

GB = 1024 * MB


def test_worked_example_80_vs_average_60_offloads_15_percent_of_traffic() -> None:
    # Seed: usage 80 %, average 60 %, threshold 10 -> (0.8 - 0.6 - 0.1 + 0.05) * 10 GB = 1.5 GB.
    sizes = {"b-1000": 1.0 * GB, "b-0400": 0.4 * GB, "b-0300": 0.3 * GB, "b-0200": 0.2 * GB}
    load = cluster(
        {
            "hot": broker(cpu=80, tp=10 * GB, bundles=sizes),
            "cold": broker(cpu=40, tp=GB, bundles=["c1", "c2"]),
        },
        {name: bundle(tp=v) for name, v in sizes.items()},
    )
    result = ThresholdShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    why = result.brokers["hot"].numbers
    assert why["average"] == pytest.approx(0.6)
    assert why["target"] == pytest.approx(1.5 * GB, rel=1e-6)
    # Largest first while the amount taken is short of 1.5 GB: 1.0, 1.4, then 1.7 covers it.
    assert result.unloads == {"hot": ["b-1000", "b-0400", "b-0300"]}
    assert [d.numbers["offloadedBefore"] for d in result.decisions] == pytest.approx([0, 1.0 * GB, 1.4 * GB])
    assert result.brokers["cold"].reason == "below_threshold"


def test_history_example_0_9_weights_the_old_score() -> None:
    # Seed: last score 80, current usage 50 -> 80 * 0.9 + 50 * 0.1 = 77.
    shedder = ThresholdShedder()
    conf = LoadBalancerConfig()
    shedder.find_bundles_for_unloading(cluster({"a": broker(cpu=80), "b": broker(cpu=20)}), conf)
    assert shedder.history["a"] == pytest.approx(0.80)
    shedder.find_bundles_for_unloading(cluster({"a": broker(cpu=50), "b": broker(cpu=20)}), conf)
    assert shedder.history["a"] == pytest.approx(0.77)
    assert shedder.history["b"] == pytest.approx(0.20)


def test_smoothing_keeps_shedding_after_real_usage_evened_out() -> None:
    shedder = ThresholdShedder()
    conf = LoadBalancerConfig()
    names = [f"h{i}" for i in range(4)]
    bundles = {n: bundle(tp=100 * MB) for n in names}

    def round_(hot: float, cold: float) -> list[str]:
        load = cluster(
            {"hot": broker(cpu=hot, tp=400 * MB, bundles=names), "cold": broker(cpu=cold, bundles=["c"])},
            bundles,
        )
        return shedder.find_bundles_for_unloading(load, conf).unloads.get("hot", [])

    assert round_(90, 10)
    # Both brokers really sit at 50 %, but the history still says 86 vs 14.
    assert round_(50, 50)
    assert shedder.history["hot"] == pytest.approx(0.86)


def test_exactly_at_average_plus_threshold_sheds() -> None:
    # 65 vs 45: average 55, bar 65 -> the hot broker is exactly on the bar; `<` skips, equality sheds.
    # 65/100 and 45/100 in float32 differ from the decimals; the bar comparison must still hold.
    load = cluster(
        {"a": broker(cpu=65, tp=1000 * MB, bundles=["x", "y"]), "b": broker(cpu=45)},
        {"x": bundle(tp=600 * MB), "y": bundle(tp=400 * MB)},
    )
    result = ThresholdShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    nums = result.brokers["a"].numbers
    assert (nums["usage"] >= nums["bar"]) == ("a" in result.unloads)


def test_target_below_min_throughput_is_skipped() -> None:
    load = cluster(
        {"a": broker(cpu=90, tp=10 * MB, bundles=["x", "y"]), "b": broker(cpu=10)},
        {"x": bundle(tp=5 * MB), "y": bundle(tp=5 * MB)},
    )
    result = ThresholdShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.count == 0
    assert result.brokers["a"].reason == "below_min_throughput"
    assert result.brokers["a"].numbers["target"] < result.brokers["a"].numbers["minThroughput"]


@pytest.mark.parametrize("owned", [[], ["only"]])
def test_single_or_no_bundle_is_never_shed(owned: list[str]) -> None:
    load = cluster(
        {"a": broker(cpu=95, tp=1000 * MB, bundles=owned), "b": broker(cpu=5)}, {"only": bundle(tp=1000 * MB)}
    )
    result = ThresholdShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.count == 0
    assert result.brokers["a"].reason == ("single_bundle" if owned else "no_bundles")


def test_empty_and_one_broker_clusters() -> None:
    conf = LoadBalancerConfig()
    assert ThresholdShedder().find_bundles_for_unloading(cluster({}), conf).count == 0
    one = cluster({"a": broker(cpu=99, tp=GB, bundles=["x", "y"])}, {"x": bundle(tp=GB), "y": bundle(tp=GB)})
    # Alone, a broker is the average: never above average + threshold.
    assert ThresholdShedder().find_bundles_for_unloading(one, conf).count == 0


def test_zero_usage_everywhere_returns_zero_average() -> None:
    load = cluster(
        {"a": broker(tp=GB, bundles=["x", "y"]), "b": broker()}, {"x": bundle(tp=GB), "y": bundle()}
    )
    result = ThresholdShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.count == 0
    assert result.summary.reason == "zero_average"


def test_lower_boundary_sheds_half_threshold_share_from_busiest_multi_bundle_broker() -> None:
    conf = LoadBalancerConfig(lowerBoundarySheddingEnabled=True)
    # 50, 50, 34: average 44.67, nobody over 54.67, but 34 < 34.67 (avg - t) -> lower boundary.
    names = [f"a{i}" for i in range(10)]
    load = cluster(
        {
            "a": broker(cpu=50, tp=1000 * MB, bundles=names),
            "b": broker(cpu=50, tp=1000 * MB, bundles=["b0"]),
            "c": broker(cpu=34, tp=100 * MB, bundles=["c0", "c1"]),
        },
        {**{n: bundle(tp=100 * MB) for n in names}, "b0": bundle(tp=GB), "c0": bundle(), "c1": bundle()},
    )
    off = ThresholdShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert off.count == 0
    result = ThresholdShedder().find_bundles_for_unloading(load, conf)
    # target = 1000 MB * 0.1 * 0.5 = 50 MB: one 100 MB bundle covers it.
    assert result.count == 1
    assert list(result.unloads) == ["a"]
    assert result.brokers["a"].numbers["target"] == pytest.approx(50 * MB)
    assert result.brokers["a"].reason == "lower_boundary"


def test_lower_boundary_folds_the_sample_twice() -> None:
    shedder = ThresholdShedder()
    conf = LoadBalancerConfig(lowerBoundarySheddingEnabled=True)
    shedder.find_bundles_for_unloading(cluster({"a": broker(cpu=50), "b": broker(cpu=40)}), conf)
    shedder.find_bundles_for_unloading(cluster({"a": broker(cpu=10), "b": broker(cpu=40)}), conf)
    # Pulsar's quirk: nothing shed in step B, so step C recomputes the average, blending 10 % in again.
    assert shedder.history["a"] == pytest.approx((0.5 * 0.9 + 0.1 * 0.1) * 0.9 + 0.1 * 0.1)


def test_recently_unloaded_and_system_bundles_are_not_candidates() -> None:
    sys_bundle = "pulsar/system/0x00000000_0xffffffff"
    heartbeat = "pulsar/standalone/localhost:8080/0x00000000_0xffffffff"
    owned = [sys_bundle, heartbeat, "ns/a", "ns/b"]
    load = cluster(
        {"a": broker(cpu=95, tp=4 * GB, bundles=owned), "b": broker(cpu=5)},
        {
            sys_bundle: bundle(tp=4 * GB),
            heartbeat: bundle(tp=3 * GB),
            "ns/a": bundle(tp=2 * GB),
            "ns/b": bundle(tp=GB),
        },
        recent={"ns/a": 1},
    )
    result = ThresholdShedder().find_bundles_for_unloading(load, LoadBalancerConfig())
    assert result.unloads == {"a": ["ns/b"]}
    nums = result.brokers["a"].numbers
    assert (nums["skippedSystem"], nums["skippedRecentlyUnloaded"]) == (2, 1)


def test_departed_brokers_history_is_dropped() -> None:
    shedder = ThresholdShedder()
    shedder.find_bundles_for_unloading(
        cluster({"a": broker(cpu=50), "b": broker(cpu=40)}), LoadBalancerConfig()
    )
    shedder.on_active_brokers_change({"b"})
    assert set(shedder.history) == {"b"}
