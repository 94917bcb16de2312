"""Per-report sampling of bundle time averages (``balancer.report_fold``) and the incremental ranges
cache: folding only changed reports gives what Pulsar's full ``updateBundleData`` pass gives for
those reports, and folding nothing changes nothing."""

from __future__ import annotations

import random

import pytest

from balancer.loaddata import update_bundle_data
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceQuota,
)
from balancer.placement.context import PlacementContext
from balancer.report_fold import ReportIndex, fold_reports, refresh_time_averages

A, B, C = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xc0000000"


def report(**bundles: float) -> LocalBrokerData:
    names = {"a": A, "b": B, "c": C}
    stats = {
        names[k]: NamespaceBundleStats(msg_rate_in=r, msg_throughput_in=r * 1000, topics=2)
        for k, r in bundles.items()
    }
    return LocalBrokerData(last_stats=stats)


def load_of(**reports: LocalBrokerData) -> LoadData:
    return LoadData(broker_data={b: BrokerData(local_data=r) for b, r in reports.items()})


def samples(load: LoadData, bundle: str) -> int:
    return load.bundle_data[bundle].short_term_data.num_samples


def random_load(rng: random.Random, brokers: int, bundles: int) -> LoadData:
    names = [f"t/ns{i % 7}/0x{i:08x}_0x{i + 1:08x}" for i in range(bundles)]
    load = LoadData()
    for k in range(brokers):
        mine = rng.sample(names, rng.randint(0, bundles // 2))  # overlaps: bundles in transit
        stats = {
            b: NamespaceBundleStats(msg_rate_in=rng.uniform(0, 1e3), topics=rng.randint(0, 9)) for b in mine
        }
        load.broker_data[f"br{k}:8080"] = BrokerData(local_data=LocalBrokerData(last_stats=stats))
    return load


class TestFoldReports:
    def test_folding_every_report_is_the_full_update(self) -> None:
        rng = random.Random(3)
        for _ in range(20):
            full = random_load(rng, 6, 40)
            stored = {b: BundleData.default() for b in rng.sample(sorted({*full.bundle_data, "t/ns1/x"}), 1)}
            quotas = {"t/ns2/0x00000002_0x00000003": ResourceQuota(msg_rate_in=7.0)}
            full.bundle_data["t/ns9/0x0_0x1"] = BundleData.default()  # held, listed by nobody
            inc = full.model_copy(deep=True)
            dropped = update_bundle_data(full, 0, stored, quotas)
            got = fold_reports(inc, ReportIndex(), list(inc.broker_data), [], stored, quotas)
            assert inc == full
            assert sorted(got.dropped) == sorted(dropped) == ["t/ns9/0x0_0x1"]

    def test_nothing_changed_changes_nothing(self) -> None:
        load = load_of(x=report(a=100.0, b=5.0), y=report(c=7.0))
        index = ReportIndex()
        fold_reports(load, index, ["x", "y"], [], {}, {})
        before, kept = load.model_copy(deep=True), index.copy()
        got = fold_reports(load, index, [], [], {}, {})
        assert (got.samples, got.seeded, got.dropped, got.recomputed) == (0, [], [], set())
        assert load == before and index == kept

    def test_each_fold_of_a_report_is_one_sample(self) -> None:
        load = load_of(x=report(a=100.0), y=report(b=10.0))
        index = ReportIndex()
        fold_reports(load, index, ["x", "y"], [], {}, {})
        load.broker_data["x"].local_data = report(a=300.0)  # x's next report
        got = fold_reports(load, index, ["x"], [], {}, {})
        assert got.samples == 1 and got.recomputed == {"x"}
        assert samples(load, A) == 2 and load.bundle_data[A].short_term_data.msg_rate_in == 200.0
        assert samples(load, B) == 1  # y did not report again: no sample of its unchanged stats
        assert load.broker_data["x"].time_average_data.short_term_msg_rate_in == 200.0

    def test_a_bundle_leaving_every_report_is_dropped_once_nobody_lists_it(self) -> None:
        load = load_of(x=report(a=1.0, b=2.0), y=report(b=3.0))
        index = ReportIndex()
        fold_reports(load, index, ["x", "y"], [], {}, {})
        assert samples(load, B) == 2  # listed by both while it moves
        load.broker_data["x"].local_data = report(a=1.0)
        assert fold_reports(load, index, ["x"], [], {}, {}).dropped == []  # y still lists b
        del load.broker_data["y"]
        got = fold_reports(load, index, [], ["y"], {}, {})
        assert got.dropped == [B] and B not in load.bundle_data and index.listed == {A: 1}

    def test_a_shared_bundle_updates_the_other_listers_totals(self) -> None:
        load = load_of(x=report(a=100.0), y=report(a=100.0))
        index = ReportIndex()
        fold_reports(load, index, ["x", "y"], [], {}, {})
        load.broker_data["x"].local_data = report(a=400.0)
        got = fold_reports(load, index, ["x"], [], {}, {})
        assert got.recomputed == {"x", "y"}
        want = load.bundle_data[A].short_term_data.msg_rate_in
        assert load.broker_data["y"].time_average_data.short_term_msg_rate_in == pytest.approx(want)

    def test_held_outside_a_fold_is_dropped_and_forgotten_is_seeded_again(self) -> None:
        load = load_of(x=report(a=10.0, b=20.0))
        index = ReportIndex()
        fold_reports(load, index, ["x"], [], {}, {})
        load.bundle_data[C] = BundleData.default()  # placed, not reported yet
        del load.bundle_data[A]  # forgotten (a split parent)
        got = fold_reports(load, index, [], [], {}, {}, recheck=True)
        assert got.dropped == [C] and got.seeded == [A] and samples(load, A) == 1
        del load.bundle_data[B]  # only forgotten: the sizes tell without a recheck
        assert fold_reports(load, index, [], [], {}, {}).seeded == [B]

    def test_preallocations_end_when_the_broker_reports_them(self) -> None:
        load = load_of(x=report(a=1.0), y=report(c=1.0))
        load.broker_data["y"].preallocated_bundle_data[A] = BundleData.default()
        load.broker_data["x"].preallocated_bundle_data[B] = BundleData.default()
        index = ReportIndex()
        fold_reports(load, index, ["x", "y"], [], {}, {})
        load.broker_data["x"].local_data = report(a=1.0, b=1.0)
        fold_reports(load, index, ["x"], [], {}, {})
        assert load.broker_data["x"].preallocated_bundle_data == {}
        assert A in load.broker_data["y"].preallocated_bundle_data  # y does not report it

    def test_data_changed_outside_a_fold_reaches_its_brokers_totals(self) -> None:
        load = load_of(x=report(a=100.0), y=report(b=10.0), z=report(a=100.0, c=1.0))
        fold_reports(load, ReportIndex(), ["x", "y", "z"], [], {}, {})
        load.bundle_data[A].long_term_data.msg_rate_in = 5000.0  # adopted from the store
        assert refresh_time_averages(load, [A], skip={"z"}) == {"x"}
        assert load.broker_data["x"].time_average_data.long_term_msg_rate_in == 5000.0
        assert load.broker_data["z"].time_average_data.long_term_msg_rate_in == 101.0  # skipped


class TestIncrementalRanges:
    def test_refreshing_changed_brokers_equals_a_full_rebuild(self) -> None:
        rng = random.Random(5)
        load = random_load(rng, 8, 60)
        ctx = PlacementContext.from_load(load)
        for _ in range(30):
            changed = rng.sample(sorted(load.broker_data), min(2, len(load.broker_data)))
            for broker in changed:
                pool = sorted({b for d in load.broker_data.values() for b in d.local_data.last_stats})
                names = rng.sample(pool, min(5, len(pool)))
                load.broker_data[broker].local_data = LocalBrokerData(
                    last_stats={b: NamespaceBundleStats() for b in names}
                )
            if rng.random() < 0.2 and len(load.broker_data) > 2:
                del load.broker_data[rng.choice(sorted(load.broker_data))]
            ctx.refresh(load, changed=[b for b in changed if b in load.broker_data])
            assert ctx.bundle_ranges == PlacementContext.from_load(load).bundle_ranges
