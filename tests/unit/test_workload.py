"""The simulated workload: deterministic, keyed by bundle (load moves with the bundle), split
children share their parent's load, phases scale traffic, host usage follows owned bundles."""

from __future__ import annotations

import pytest

from balancer.errors import InvalidInput
from service.broker.workload import BundleLoad, Phase, Scenario, skewed_scenario

NS = "public/default"


def test_same_seed_same_traffic_and_noise_is_seeded() -> None:
    a = skewed_scenario(NS, 4, seed=1, noise=0.2)
    b = skewed_scenario(NS, 4, seed=1, noise=0.2)
    c = skewed_scenario(NS, 4, seed=2, noise=0.2)
    bundles = sorted(a.bundles)
    assert a.bundle_stats(bundles, 5_000) == b.bundle_stats(bundles, 5_000)
    assert a.bundle_stats(bundles, 5_000) != c.bundle_stats(bundles, 5_000)
    assert a.bundle_stats(bundles, 5_000) != a.bundle_stats(bundles, 9_000)  # jitter changes per step


def test_load_belongs_to_the_bundle_not_the_broker() -> None:
    sc = skewed_scenario(NS, 4, seed=3)
    b0, b1, b2, b3 = sorted(sc.bundles)
    first = sc.bundle_stats([b0, b1], 0)
    second = sc.bundle_stats([b1, b2, b3], 0)
    assert first[b1] == second[b1]
    moved = sc.host_usage(sc.bundle_stats([b0], 0)).cpu.usage
    stayed = sc.host_usage(sc.bundle_stats([b0, b1], 0)).cpu.usage
    assert stayed > moved  # taking a bundle away lowers the simulated CPU


def test_split_children_share_the_parents_load() -> None:
    parent = "t/ns/0x00000000_0x80000000"
    sc = Scenario(bundles={parent: BundleLoad(msg_rate_in=1000, throughput_in=4000)})
    left, right = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000"
    stats = sc.bundle_stats([left, right], 0)
    assert stats[left].msg_rate_in == pytest.approx(500)
    assert stats[left].msg_rate_in + stats[right].msg_rate_in == pytest.approx(1000)
    assert sc.bundle_stats(["t/other/0x00000000_0x40000000"], 0)[
        "t/other/0x00000000_0x40000000"
    ].msg_rate_in == (sc.default.msg_rate_in)


def test_phases_scale_by_the_most_specific_key() -> None:
    b = f"{NS}/0x00000000_0x40000000"
    sc = Scenario(
        bundles={b: BundleLoad(msg_rate_in=100)},
        phases=[Phase(at_s=10, factors={"*": 2.0}), Phase(at_s=20, factors={NS: 3.0, b: 5.0})],
    )
    assert sc.load_of(b, 5_000).msg_rate_in == 100
    assert sc.load_of(b, 15_000).msg_rate_in == 200
    assert sc.load_of(b, 25_000).msg_rate_in == 500
    assert sc.load_of(f"{NS}/0x40000000_0x80000000", 25_000).msg_rate_in == sc.default.msg_rate_in * 3


def test_host_usage_units() -> None:
    sc = Scenario(base_cpu_percent=5, cpu_percent_per_kmsg=2, nic_limit_bytes=1_000_000)
    b = f"{NS}/0x00000000_0x40000000"
    sc.bundles[b] = BundleLoad(msg_rate_in=1500, msg_rate_out=500, throughput_in=125_000, throughput_out=0)
    u = sc.host_usage(sc.bundle_stats([b], 0))
    assert u.cpu.usage == pytest.approx(9.0) and u.cpu.limit == 100
    assert u.bandwidth_in.usage == pytest.approx(1000.0) and u.bandwidth_in.limit == pytest.approx(8000.0)


def test_bad_scenario_names_the_field() -> None:
    with pytest.raises(InvalidInput) as e:
        Scenario.parse({"noise": 3})
    assert e.value.field == "workload.noise"
