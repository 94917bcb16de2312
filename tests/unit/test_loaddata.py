"""Time-averaged data updates, the report-update rule, and the leader's top-K write selection."""

from __future__ import annotations

import math

import pytest

from balancer.config import LoadBalancerConfig
from balancer.loaddata import (
    need_report_update,
    percent_change,
    report_task_due,
    top_k_bundles_to_write,
    update_bundle_data,
)
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceQuota,
    ResourceUsage,
)

CFG = LoadBalancerConfig()
A, B, C = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xc0000000"


def reporting(**per_broker: dict[str, float]) -> LoadData:
    load = LoadData()
    for broker, bundles in per_broker.items():
        stats = {
            b: NamespaceBundleStats(msg_rate_in=r, msg_throughput_in=r * 1000, topics=3)
            for b, r in bundles.items()
        }
        load.broker_data[broker] = BrokerData(local_data=LocalBrokerData(last_stats=stats))
    return load


class TestUpdateBundleData:
    def test_seeds_stored_then_quota_then_default(self) -> None:
        load = reporting(x={A: 100.0, B: 200.0, C: 300.0})
        stored = BundleData()
        stored.short_term_data.num_samples, stored.short_term_data.msg_rate_in = 4, 60.0
        update_bundle_data(load, 0, {A: stored}, {B: ResourceQuota(msg_rate_in=500.0)})
        assert load.bundle_data[A].short_term_data.msg_rate_in == pytest.approx((4 * 60 + 100) / 5)
        assert stored.short_term_data.num_samples == 4  # the stored copy is not mutated
        assert load.bundle_data[B].short_term_data.msg_rate_in == pytest.approx(0.9 * 500 + 0.1 * 200)
        assert load.bundle_data[C].short_term_data.msg_rate_in == 300.0  # default seed replaced by sample 1
        assert load.bundle_data[C].topics == 3

    def test_one_sample_per_broker_listing_and_drop_vanished(self) -> None:
        load = reporting(x={A: 100.0}, y={A: 300.0, B: 1.0})
        update_bundle_data(load, 0, {}, {})
        assert load.bundle_data[A].short_term_data.num_samples == 2
        assert load.bundle_data[A].short_term_data.msg_rate_in == 200.0
        load.broker_data["y"].local_data.last_stats = {}
        assert update_bundle_data(load, 1, {}, {}) == [B]
        assert B not in load.bundle_data

    def test_time_average_recomputed_per_broker(self) -> None:
        load = reporting(x={A: 100.0, B: 50.0})
        update_bundle_data(load, 0, {}, {})
        ta = load.broker_data["x"].time_average_data
        assert (ta.short_term_msg_rate_in, ta.long_term_msg_throughput_in) == (150.0, 150_000.0)

    def test_reported_preallocation_released(self) -> None:
        load = reporting(x={A: 1.0})
        load.broker_data["x"].preallocated_bundle_data = {A: BundleData(), B: BundleData()}
        update_bundle_data(load, 0, {}, {})
        assert list(load.broker_data["x"].preallocated_bundle_data) == [B]


def data(
    rate: float = 0.0, thr: float = 0.0, bundles: int = 0, cpu: float = 0.0, last_update: int = 0
) -> LocalBrokerData:
    return LocalBrokerData(
        msg_rate_in=rate,
        msg_throughput_in=thr,
        num_bundles=bundles,
        cpu=ResourceUsage(usage=cpu, limit=100),
        last_update=last_update,
    )


class TestNeedReportUpdate:
    def test_percent_change(self) -> None:
        assert (percent_change(0, 0), percent_change(0, 1), percent_change(200, 100)) == (0.0, math.inf, 50.0)

    def test_max_interval_forces_update(self) -> None:
        now = 16 * 60_000
        why = need_report_update(data(), data(last_update=0), CFG, now)
        assert why is not None and why.reason == "max_interval"
        assert need_report_update(data(), data(last_update=now - 15 * 60_000), CFG, now) is None

    @pytest.mark.parametrize(
        ("last", "cur", "reason"),
        [
            (data(rate=100), data(rate=111), "msg_rate_changed"),
            (data(thr=100), data(thr=89), "msg_throughput_changed"),
            (data(bundles=10), data(bundles=12), "num_bundles_changed"),
            (data(cpu=20), data(cpu=31), "resource_usage_changed"),
        ],
    )
    def test_which_figure_crossed(self, last: LocalBrokerData, cur: LocalBrokerData, reason: str) -> None:
        why = need_report_update(last, cur, CFG, 0)
        assert why is not None and why.reason == reason and why.numbers["threshold"] == 10

    def test_exactly_at_threshold_is_no_update(self) -> None:
        assert need_report_update(data(rate=100), data(rate=110), CFG, 0) is None

    def test_task_cadence(self) -> None:
        assert report_task_due(None, 0, CFG)
        assert not report_task_due(1000, 5999, CFG)
        assert report_task_due(1000, 6000, CFG)


class TestTopK:
    def load(self, n: int, brokers: int) -> LoadData:
        load = LoadData(broker_data={f"b{i}": BrokerData() for i in range(brokers)})
        for i in range(n):
            bd = BundleData()
            bd.short_term_data.msg_throughput_in = i * 1_000_000.0
            load.bundle_data[f"t/ns/bundle-{i}"] = bd
        return load

    def test_top_k_times_brokers(self) -> None:
        got = top_k_bundles_to_write(self.load(30, 2), CFG)
        assert got == [f"t/ns/bundle-{i}" for i in range(29, 9, -1)]

    def test_non_positive_k_writes_all_and_excluded_never(self) -> None:
        cfg = CFG.with_updates({"loadBalancerMaxNumberOfBundlesInBundleLoadReport": 0})
        assert len(top_k_bundles_to_write(self.load(30, 1), cfg)) == 30
        cfg = cfg.with_updates({"loadBalancerSheddingExcludedNamespaces": ["t/ns"]})
        assert top_k_bundles_to_write(self.load(30, 1), cfg) == []
