"""BalancedShedder's join rule (issue 46): a broker its traffic says is (nearly) empty is filled on its
first report, whatever its idle JVM's CPU reads; a light broker that is not new is left alone."""

from __future__ import annotations

from balancer.config import LoadBalancerConfig
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData, ResourceUsage
from balancer.shedding.balanced import BalancedShedder
from tests.unit.test_balanced_strategy import cluster, window

CONFIG = LoadBalancerConfig()
OFF = CONFIG.with_updates({"loadBalancerBalancedShedderUnderloadedMultiplier": 0.0})
KEY = "loadBalancerBalancedShedderUnderloadedMultiplier"


def joined(new_cpu: float = 18.0, new_rates: list[float] | None = None) -> LoadData:
    """Three brokers at 23-31 % with traffic and a new one whose idle JVM reads ``new_cpu``: within the
    fast path's 20 points of the target (the real-broker case of issue 46)."""
    return cluster(
        {
            "a": (31.0, [1000.0] * 12),
            "b": (27.0, [1000.0] * 10),
            "c": (23.0, [1000.0] * 8),
            "new": (new_cpu, new_rates or []),
        }
    )


def test_an_empty_broker_whose_idle_cpu_is_within_the_fast_path_is_filled_on_its_first_report() -> None:
    s = BalancedShedder()
    first = s.find_bundles_for_unloading(joined(), CONFIG)
    assert first.count > 0
    assert set(first.destinations.values()) == {"new"}
    why = first.brokers["new"]
    assert why.reason == "triggered"
    assert why.numbers["joinRule"] is True
    assert "owns no bundles" in why.message
    assert first.summary.numbers["joining"] == 1
    for d in first.decisions:  # every move downhill by report
        assert d.numbers["sourceUtil"] > 18.0


def test_without_the_rule_the_same_broker_waits_for_the_slow_count() -> None:
    s = BalancedShedder()
    counts = [s.find_bundles_for_unloading(joined(), OFF).count for _ in range(7)]
    assert counts == [0] * 7  # 8 confirming cycles under the fast path's gap (issue 46: minute 16)


def test_a_broker_with_a_trickle_of_traffic_below_the_fraction_is_joining() -> None:
    # Health checks keep a new broker's traffic above zero (why Pulsar's rule is relative).
    s = BalancedShedder()
    first = s.find_bundles_for_unloading(joined(new_rates=[50.0, 50.0]), CONFIG)
    assert set(first.destinations.values()) == {"new"}
    assert "below 0.125" in first.brokers["new"].message
    assert KEY in first.brokers["new"].message


def test_a_broker_above_the_fraction_is_not_joining() -> None:
    # 3,000 msg/s against the busiest's 12,000: 25 %, not below 0.125; within the band: nothing moves.
    s = BalancedShedder()
    first = s.find_bundles_for_unloading(joined(new_cpu=22.0, new_rates=[1000.0] * 3), CONFIG)
    assert first.brokers["new"].numbers["joinRule"] is False
    assert first.count == 0


def _light_small_broker(cpu_noise: float) -> LoadData:
    """Four brokers at ~40 %: three big ones and a small one (a tenth of their capacity) carrying a
    tenth of their traffic: light by traffic, balanced by utilisation."""
    load = LoadData()
    for name, cpu, rates in (
        ("a", 40.0 + cpu_noise, [1000.0] * 20),
        ("b", 40.0 - cpu_noise, [1000.0] * 20),
        ("c", 40.0, [1000.0] * 20),
        ("small", 40.0 + cpu_noise / 2, [1000.0] * 2),
    ):
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


def test_a_legitimately_light_broker_that_is_not_new_never_flaps() -> None:
    # Its traffic is 10 % of the busiest's, below the fraction; per unit of its capacity it is as busy
    # as the others, so the rule does not fire, and 40 quiet cycles move nothing.
    s = BalancedShedder()
    counts = []
    for k in range(40):
        result = s.find_bundles_for_unloading(_light_small_broker(2.0 if k % 2 else -2.0), CONFIG)
        counts.append(result.count)
        assert result.brokers["small"].numbers.get("joinRule") is not True
    assert counts == [0] * 40
