"""BalancedShedder against placement's filters and CPU noise: destinations the even-distribution
filter allows, re-placing a bundle whose bound destination was filtered out, hardware classes, and the
slow-drift count on traffic rather than on noisy usage (issue 19, generated heterogeneous clusters)."""

from __future__ import annotations

import random

import pytest

from balancer.config import LoadBalancerConfig
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageMessageData,
)
from balancer.shedding.balanced import BalancedShedder
from balancer.shedding.capacity import View, hardware_classes
from balancer.shedding.selection import ResultBuilder
from balancer.shedding.water_fill import even_spread, water_fill

CONFIG = LoadBalancerConfig()


def window(rate: float) -> TimeAverageMessageData:
    return TimeAverageMessageData(
        max_samples=10,
        num_samples=10,
        msg_rate_in=rate / 2,
        msg_rate_out=rate / 2,
        msg_throughput_in=rate * 512,
        msg_throughput_out=rate * 512,
    )


def cluster(brokers: dict[str, tuple[float, list[tuple[str, float]]]]) -> LoadData:
    """broker -> (cpu percent, [(namespace, msg rate)] of its bundles), reported in last_stats as the
    placement filters read them; 1 KiB messages."""
    load = LoadData()
    for name, (cpu, bundles) in brokers.items():
        local = LocalBrokerData(cpu=ResourceUsage(usage=cpu, limit=100.0))
        for i, (ns, r) in enumerate(bundles):
            bundle = f"{ns}/{name}_{i}"
            local.bundles.add(bundle)
            local.last_stats[bundle] = NamespaceBundleStats(
                msg_rate_in=r / 2, msg_rate_out=r / 2, msg_throughput_in=r * 512, msg_throughput_out=r * 512
            )
            load.bundle_data[bundle] = BundleData(short_term_data=window(r), long_term_data=window(r))
        rate = sum(r for _, r in bundles)
        local.msg_rate_in = local.msg_rate_out = rate / 2
        local.msg_throughput_in = local.msg_throughput_out = rate * 512
        load.broker_data[name] = BrokerData(local_data=local)
    return load


def test_even_spread_allows_only_brokers_holding_the_fewest_bundles_of_the_namespace() -> None:
    x = ("t/x", 10.0)
    load = cluster({"a": (50.0, [x, x]), "b": (30.0, [x]), "c": (30.0, [])})
    view = View(dict.fromkeys("abc", 30.0), dict.fromkeys("abc", 1.0), dict.fromkeys("abc", 1.0), 30, 1, 1, 1)
    allowed = even_spread(load, view)
    assert [allowed("t/x/0x1_0x2", b) for b in "abc"] == [False, False, True]
    assert all(allowed("t/y/0x1_0x2", b) for b in "abc")  # nobody holds t/y


def _fill(allowed: bool) -> list[tuple[str, str]]:
    """a (110) sheds toward b (90, the lowest) and c (95); a's bundles are all of namespace t/x, of
    which b already holds one and c none."""
    load = cluster(
        {
            "a": (0.0, [("t/x", 4.0), ("t/x", 3.0), ("t/z", 103.0)]),
            "b": (0.0, [("t/x", 90.0)]),
            "c": (0.0, [("t/y", 95.0)]),
            "d": (0.0, [("t/x", 50.0), ("t/y", 55.0)]),
        }
    )
    traffic = {"a": 110.0, "b": 90.0, "c": 95.0, "d": 105.0}
    view = View(dict(traffic), traffic, dict.fromkeys(traffic, 1.0), 100.0, 100.0, 1.0, 1e12)
    out = ResultBuilder("BalancedShedder")
    water_fill(load, view, ["a"], ["b", "c"], 1.0, out, even_spread(load, view) if allowed else None)
    return [(d.subject or "", d.numbers["destination"]) for d in out.decisions if d.subject]


def test_water_filling_sends_a_bundle_only_where_the_even_distribution_filter_lets_it_go() -> None:
    # b is lowest, but holds a t/x bundle: the filter would remove it and the bound bundle would be
    # placed by another rule. With the filter known, a's t/x bundles go to c.
    assert {d for _, d in _fill(allowed=False)} == {"b"}
    moved = _fill(allowed=True)
    assert moved and {d for _, d in moved} == {"c"}


def test_a_bundle_whose_bound_destination_was_filtered_goes_below_the_target_or_stays() -> None:
    s = BalancedShedder()
    s.plan_moves = {"t/x/0x1_0x2": ("a", 5.0)}
    s.plans = {"t/x/0x1_0x2": "b"}
    s.plan_gaps = {"a": 2.0, "b": -3.0, "c": -4.0, "d": 3.0, "e": 0.5}
    s.plan_tol = 1.0
    caps = dict.fromkeys("abcde", 1.0)
    view = View(dict.fromkeys("abcde", 30.0), dict.fromkeys("abcde", 30.0), caps, 30, 30, 1, 1)
    s._view = view
    load = LoadData()
    s._view_of = load.broker_data
    data = BundleData()
    rng = random.Random(1)
    # c ends at +1 (within the tolerance, below the source's +2); d and e would end above.
    assert s.select_broker(["a", "c", "d", "e"], "t/x/0x1_0x2", data, load, CONFIG, rng).broker == "c"
    # c now has the bundle pending: nobody else stays within the tolerance, so the bundle stays.
    choice = s.select_broker(["a", "d", "e"], "t/x/0x1_0x2", data, load, CONFIG, rng)
    assert choice.broker is None and choice.explanation.reason == "no_room_left"


def test_estimates_of_one_hardware_class_are_snapped_together() -> None:
    est = {"s1": 1500.0, "s2": 1480.0, "s3": 1530.0, "b1": 2850.0, "b2": 3150.0, "b3": 3000.0, "x": 9000.0}
    out = hardware_classes(est, 1500.0)
    assert {out[b] for b in ("s1", "s2", "s3")} == {1500.0}
    assert {out[b] for b in ("b1", "b2", "b3")} == {3000.0}
    assert out["x"] == 9000.0


def test_a_median_between_two_classes_does_not_merge_them() -> None:
    # heterogeneous #31: three 2x, five 3x and two 0.5x brokers. The median (3,550) falls between the
    # 2x and 3x classes, with one broker of each within 15% of it: snapped there, they became one
    # class (and flipped in and out of it as their estimates moved).
    est = {"h0": 700.0, "h1": 710.0, "t0": 2900.0, "t1": 3000.0, "t2": 3100.0}
    est |= {f"u{i}": c for i, c in enumerate((4000.0, 4100.0, 4300.0, 4400.0, 4500.0))}
    out = hardware_classes(est, 3550.0)
    assert len({out[b] for b in ("t0", "t1", "t2")}) == 1
    assert len({out[f"u{i}"] for i in range(5)}) == 1
    assert out["t2"] < 3200.0 < 3900.0 < out["u0"]


def test_slow_drift_counts_traffic_not_noisy_usage() -> None:
    # d carries 20% less traffic than the others call after call (max/min 1.25, past BALANCED_ENOUGH),
    # but its CPU noise puts it in and out of the band in turn, so its hit count never fires; its
    # traffic gap does drift, and after 2 x HitCountLow calls it pulls from the others. (At 8% less,
    # as this test had it, brokers of one declared size are balanced enough: it passed only because
    # the noise made d's capacity estimate 17% above the others'.)
    s = BalancedShedder()
    full = [("t/a", 30.0 * 25.0 / 20)] * 20
    low = [("t/d", 0.8 * 30.0 * 25.0 / 20)] * 20
    need = 2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    counts = []
    for k in range(need + 2):
        cpu_d = 24.0 + (4.0 if k % 2 else -4.0)
        load = cluster({"a": (30.0, full), "b": (30.0, full), "c": (30.0, full), "d": (cpu_d, low)})
        r = s.find_bundles_for_unloading(load, CONFIG)
        counts.append(r.count)
        if r.count:
            assert set(r.destinations.values()) == {"d"}
            break
    assert counts[-1] > 0 and len(counts) == pytest.approx(need, abs=2)
