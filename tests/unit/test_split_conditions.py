"""Split conditions of Pulsar's BundleSplitterTask."""

from __future__ import annotations

import pytest

from balancer.config import LoadBalancerConfig
from balancer.models import MIB, BrokerData, BundleData, LoadData, LocalBrokerData, NamespaceBundleStats
from balancer.split.conditions import find_bundles_to_split, split_enabled


def load_with(
    stats: dict[str, dict[str, int]], rates: dict[str, tuple[float, float]] | None = None
) -> LoadData:
    last = {b: NamespaceBundleStats.model_validate(s) for b, s in stats.items()}
    load = LoadData(broker_data={"b1:8080": BrokerData(local_data=LocalBrokerData(last_stats=last))})
    for b, (rate, thr) in (rates or {}).items():
        bd = BundleData()
        lt = bd.long_term_data
        lt.msg_rate_in, lt.msg_rate_out, lt.msg_throughput_in, lt.msg_throughput_out = rate, 0.0, thr, 0.0
        load.bundle_data[b] = bd
    return load


CFG = LoadBalancerConfig()
B = "t/ns/0x00000000_0x80000000"


@pytest.mark.parametrize(
    ("stats", "rates", "reason"),
    [
        ({"topics": 1001}, None, "too_many_topics"),
        ({"topics": 2, "consumerCount": 600, "producerCount": 401}, None, "too_many_sessions"),
        ({"topics": 2}, (30_001.0, 0.0), "msg_rate_too_high"),
        ({"topics": 2}, (0.0, 100 * MIB + 1), "throughput_too_high"),
    ],
)
def test_each_condition(stats: dict[str, int], rates: tuple[float, float] | None, reason: str) -> None:
    found = find_bundles_to_split(load_with({B: stats}, {B: rates} if rates else None), CFG, {"t/ns": 4})
    assert [(c.bundle, c.broker, c.explanation.reason) for c in found] == [(B, "b1:8080", reason)]


def test_at_the_limits_no_split() -> None:
    load = load_with(
        {B: {"topics": 1000, "consumerCount": 500, "producerCount": 500}}, {B: (30_000.0, 100.0 * MIB)}
    )
    assert find_bundles_to_split(load, CFG, {"t/ns": 4}) == []


def test_one_topic_never_splits() -> None:
    load = load_with({B: {"topics": 1, "consumerCount": 5000}}, {B: (1e9, 1e12)})
    assert find_bundles_to_split(load, CFG, {"t/ns": 4}) == []


def test_sessions_limit_disabled_when_not_positive() -> None:
    cfg = CFG.with_updates({"loadBalancerNamespaceBundleMaxSessions": 0})
    load = load_with({B: {"topics": 2, "consumerCount": 10**6}})
    assert find_bundles_to_split(load, cfg, {"t/ns": 4}) == []


def test_namespace_at_maximum_bundle_count() -> None:
    load = load_with({B: {"topics": 5000}})
    assert find_bundles_to_split(load, CFG, {"t/ns": 128}) == []
    assert len(find_bundles_to_split(load, CFG, {"t/ns": 127})) == 1


def test_maximum_counts_acceptances_in_the_same_pass() -> None:
    names = [f"t/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(5)]
    load = load_with({n: {"topics": 5000} for n in names})
    cfg = CFG.with_updates({"loadBalancerNamespaceMaximumBundles": 4})
    found = find_bundles_to_split(load, cfg, {"t/ns": 1})
    assert [c.bundle for c in found] == names[:3]
    assert found[-1].explanation.numbers["accepted_in_pass"] == 3


def test_unknown_namespace_counts_reported_bundles() -> None:
    names = [f"t/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(3)]
    load = load_with({n: {"topics": 5000} for n in names})
    cfg = CFG.with_updates({"loadBalancerNamespaceMaximumBundles": 4})
    assert len(find_bundles_to_split(load, cfg, {})) == 1


def test_split_enabled() -> None:
    load = load_with({})
    assert split_enabled(load, CFG).reason == "too_few_brokers"  # type: ignore[union-attr]
    load.broker_data["b2:8080"] = BrokerData()
    assert split_enabled(load, CFG) is None
    assert split_enabled(load, CFG.with_updates({"loadBalancerAutoBundleSplitEnabled": False})) is not None
