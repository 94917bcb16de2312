"""Brokers that declare the same size (CPU and NIC limits) share one capacity (issue 46): their traffic
per CPU point differs with what they carry, not with what they are, and a fill that took that for
weaker hardware left real brokers of equal quotas at msg-rate max/min 1.5 after a join."""

from __future__ import annotations

from collections import Counter

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData, ResourceUsage
from balancer.shedding.balanced import BalancedShedder
from balancer.shedding.capacity import declared_size, same_declared_size
from tests.unit.test_balanced_strategy import cluster

CONFIG = LoadBalancerConfig()


def sized(load: LoadData, cpu: dict[str, float], nic: float = 1_250_000.0) -> LoadData:
    for b, limit in cpu.items():
        local = load.broker_data[b].local_data
        local.cpu = ResourceUsage(usage=local.cpu.usage * limit / 100, limit=limit)
        local.bandwidth_in = ResourceUsage(usage=0.0, limit=nic)
        local.bandwidth_out = ResourceUsage(usage=0.0, limit=nic)
    return load


def test_equal_limits_share_the_median_within_three_times_it_unless_overloaded() -> None:
    load = sized(
        cluster({b: (40.0, [1000.0]) for b in "abcde"}), {"a": 40, "b": 40, "c": 40, "d": 40, "e": 60}
    )
    est = {"a": 10.0, "b": 6.0, "c": 9.0, "d": 3.0, "e": 15.0}
    util = dict.fromkeys("abcde", 50.0)
    out = same_declared_size(est, load, util, 85)
    # a, b, c, d declare 40 cores-percent; their median is 7.5: 10, 6, 9 and 3 are within 3x of it
    assert out == {"a": 7.5, "b": 7.5, "c": 7.5, "d": 7.5, "e": 15.0}
    far = same_declared_size(dict(est, d=2.0), load, util, 85)  # 2 is more than 3x below 7.5
    assert far["d"] == 2.0 and far["a"] == far["b"] == far["c"] == 7.5
    # At the overload threshold a broker's CPU counts: its own estimate stands.
    hot = same_declared_size(est, load, dict(util, d=85.0), 85)
    assert hot["d"] == 3.0 and hot["a"] == hot["b"] == hot["c"] == 7.5


def test_percentages_only_declare_no_size() -> None:
    # Extensible brokers' metrics give usages in percent with every limit at 100: no size said.
    load = cluster({"a": (40.0, [1000.0]), "b": (40.0, [1000.0])})
    for b in "ab":
        local = load.broker_data[b].local_data
        for name in ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out"):
            setattr(local, name, ResourceUsage(usage=40.0, limit=100.0))
    assert declared_size(load, "a") is None
    assert same_declared_size({"a": 10.0, "b": 6.0}, load, {"a": 40.0, "b": 40.0}, 85) == {
        "a": 10.0,
        "b": 6.0,
    }
    no_cpu = sized(cluster({"a": (40.0, [1000.0])}), {"a": 0.0})
    assert declared_size(no_cpu, "a") is None


def test_a_joiner_reading_two_and_a_half_times_its_peers_cpu_per_message_is_filled_to_their_traffic() -> None:
    # The real seed-3 case: after two bundles the joiner read 47 % CPU for 230 msg/s (9.7 msg/s per
    # point) against 24 on the others; with its own estimate it looked full and the join stopped at
    # max/min 2.3. Of one size with its peers, it is still a destination.
    load = cluster(
        {
            "a": (48.0, [100.0] * 12),
            "b": (30.0, [100.0] * 8),
            "c": (30.0, [100.0] * 8),
            "new": (47.0, [100.0] * 2),
        }
    )
    s = BalancedShedder()
    s.capacity.update({"a": 24.0, "b": 24.0, "c": 24.0, "new": 9.7})
    s.find_bundles_for_unloading(load, CONFIG)
    view = s._view
    assert view is not None
    assert view.capacity["new"] == view.capacity["b"]
    assert view.implied("new") < view.traffic_target  # an under-filled broker, not a full one


def test_a_join_fills_every_broker_of_one_size_to_the_same_traffic_whatever_its_cpu_per_message() -> None:
    # a's CPU per message is 1.6x b's and c's (on real brokers: the broker that had owned every bundle),
    # all three declare the same size; a broker joins. Taken for weaker hardware, a would keep about
    # 5 of its 10 bundles while the new broker got 8: traffic max/min 1.6.
    load = cluster(
        {
            "a": (48.0, [1000.0] * 10),
            "b": (30.0, [1000.0] * 10),
            "c": (30.0, [1000.0] * 10),
            "new": (18.0, []),
        }
    )
    s = BalancedShedder()
    plan = s.find_bundles_for_unloading(load, CONFIG)
    assert plan.count > 0
    owned = {b: len(load.broker_data[b].local_data.bundles) for b in load.broker_data}
    for bundle, dest in plan.destinations.items():
        owned[bundle.split("/")[1]] -= 1
        owned[dest] += 1
    assert max(owned.values()) / min(owned.values()) <= 8 / 7
    sources = Counter(bundle.split("/")[1] for bundle in plan.destinations)
    assert sources["a"] <= 3  # a gives its share, not half of what it has
