"""The live leader adopts longTermData the long-term job merges into ZooKeeper, and never clobbers it.

The merge is the one the Spark job runs (``service.longterm.merge.merge_long_term``); the leader is a real
``LoadManagerService`` with a simulated broker agent, or, for the race, ``LeaderJobs`` driven by hand.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from balancer.models import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageMessageData,
)
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from service.broker.workload import BundleLoad, Scenario
from service.leader.cluster_view import DecisionLog
from service.leader.executors import ZkExecutor
from service.leader.jobs import LeaderJobs
from service.leader.load_view import LoadView, Snapshot
from service.leader.metrics_sink import NoMetrics
from service.leader.service import make_strategies
from service.longterm.merge import merge_long_term
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "lt/adopt"
BROKER = "b1:8080"
MERGED = TimeAverageMessageData(
    max_samples=1000,
    num_samples=1000,
    msg_rate_in=50_000.0,
    msg_rate_out=40_000.0,
    msg_throughput_in=5.0e7,
    msg_throughput_out=4.0e7,
)
# A full window moves by 1/1000 of the gap per leader sample: 10 % covers ~100 samples.
KEPT = 0.9


def _kept(data: TimeAverageMessageData) -> bool:
    """Still the merged window, continued by the leader's samples of a ~100-300 msg/s bundle."""
    return (
        KEPT * MERGED.msg_rate_in <= data.msg_rate_in <= MERGED.msg_rate_in
        and KEPT * MERGED.msg_rate_out <= data.msg_rate_out <= MERGED.msg_rate_out
        and data.num_samples == MERGED.num_samples
    )


def _node(store: ZkStore, bundle: str) -> tuple[BundleData, int]:
    got = store.get_model(P.bundle_data_path(bundle), BundleData)
    assert got is not None, f"no bundle data for {bundle}"
    return got.value, got.version


def test_live_leader_adopts_merged_long_term_data_and_keeps_it(cluster: Cluster) -> None:
    config = fast_config(loadBalancerResourceQuotaUpdateIntervalMinutes=0.02)  # writes every 1.2 s
    cluster.scenario(Scenario(namespaces={NS: 2}))
    cluster.assign_all(BROKER)
    cluster.agent(BROKER, config)
    svc = cluster.service("s1:7011", config)
    wait_for(svc.is_leader, 15, what="leadership")
    target, other = sorted(cluster.bundles())
    wait_for(
        lambda: _node(cluster.admin, target)[0].short_term_data.num_samples > 0,
        20,
        what="the leader's bundle data of a sampled bundle in ZooKeeper",
    )
    assert _node(cluster.admin, target)[0].long_term_data.msg_rate_in < 1000  # the leader's own view

    report = merge_long_term(cluster.admin.client, {target: MERGED}, {target})
    assert report.updated == 1, report.outcomes
    merged_version = _node(cluster.admin, target)[1]

    # (a) the next sampling refresh adopts it: the leader's view and LoadData show the merged window.
    wait_for(lambda: _kept(svc.view().bundle_data[target].long_term_data), 15, what="adoption")
    # The view can show the merged node before the leader's next sampling refresh (a follower's view,
    # or a leader between a resync and its next job, reads the store): wait for the refresh itself.
    wait_for(lambda: svc._loadview.adopted_long_term_total >= 1, 15, what="the adoption counted")
    adoptions = svc.decisions(100, "adoption")
    assert adoptions and adoptions[0].bundle == target, adoptions
    assert adoptions[0].explanation["reason"] == "adopted-long-term-data"
    assert adoptions[0].explanation["numbers"]["bundles"] == 1
    assert svc.view().bundle_data[other].long_term_data.msg_rate_in < 1000  # only the merged bundle

    # (b) the leader keeps writing (short-term follows its samples of the new traffic) and the
    # merged long-term window survives every write.
    cluster.admin.write_workload(
        Scenario(namespaces={NS: 2}, default=BundleLoad(msg_rate_in=300.0, msg_rate_out=300.0)).model_dump(
            mode="json"
        )
    )

    def short_term_followed() -> bool:
        data, version = _node(cluster.admin, target)
        return version >= merged_version + 2 and data.short_term_data.msg_rate_in > 150

    wait_for(short_term_followed, 20, what="leader writes with short-term data of the new traffic")
    data, _ = _node(cluster.admin, target)
    assert _kept(data.long_term_data), data.long_term_data
    assert data.short_term_data.msg_rate_in < 1000

    # (c) LeastLongTermMessageRate scores the owner by the adopted window (TimeAverageBrokerData).
    with svc._lock:
        broker = svc._loadview.load.broker_data[BROKER].model_copy(deep=True)
        held = {b: d.long_term_data for b, d in svc._loadview.load.bundle_data.items()}
    ta = broker.time_average_data
    assert ta.long_term_msg_rate_in == pytest.approx(sum(d.msg_rate_in for d in held.values()))
    assert ta.long_term_msg_rate_in >= KEPT * MERGED.msg_rate_in
    score = LeastLongTermMessageRate().score(broker, config)
    assert score >= KEPT * (MERGED.msg_rate_in + MERGED.msg_rate_out)


def _jobs(store: ZkStore, view: LoadView) -> LeaderJobs:
    fence = store.bump_epoch("test-leader")  # the writer fences bundle data on the leader epoch
    return LeaderJobs(
        store,
        ZkExecutor(store, lambda: fence),
        ZkExecutor(store, lambda: fence),
        view,
        DecisionLog(10),
        NoMetrics(),
        None,
        lambda: True,
        lambda: None,
        random.Random(1),
    )


def test_a_merge_racing_the_writer_is_not_overwritten_and_is_adopted_next(cluster: Cluster) -> None:
    """The merge lands between the writer's read and its write: the write is skipped, not forced."""
    config = fast_config()
    store = cluster.admin
    (bundle,) = store.create_namespace(NS, 1).bundle_names
    stats = NamespaceBundleStats(msg_rate_in=100.0, msg_rate_out=100.0, msg_throughput_in=1e5, topics=3)
    local = LocalBrokerData(web_service_url=f"http://{BROKER}", cpu=ResourceUsage(usage=10.0, limit=100.0))
    local.update(local.usages(), {bundle: stats})
    store.put_json(P.broker_path(BROKER), local.to_json_dict(), ephemeral=True)
    view = LoadView()
    jobs = _jobs(store, view)
    shedder, placement = make_strategies(config)

    assert jobs.write_bundle_data(config, shedder, placement) == 1  # first sight, no node: created
    first, version = _node(store, bundle)
    assert view.expected_version(bundle) == version
    assert first.long_term_data.msg_rate_in == pytest.approx(100.0)

    refresh: Callable[..., Snapshot] = view.refresh

    def refresh_then_merge(*args: Any, **kw: Any) -> Snapshot:  # the merge lands after the refresh
        view.refresh = refresh  # type: ignore[method-assign]
        snap = refresh(*args, **kw)
        assert merge_long_term(store.client, {bundle: MERGED}, {bundle}).updated == 1
        return snap

    view.refresh = refresh_then_merge  # type: ignore[method-assign]
    assert jobs.write_bundle_data(config, shedder, placement) == 0
    assert jobs.bundle_data_conflicts == 1
    raced, raced_version = _node(store, bundle)
    assert raced.long_term_data == MERGED  # exactly the merge, not the leader's window
    assert raced.short_term_data == first.short_term_data  # the merge keeps the rest
    assert view.load.bundle_data[bundle].long_term_data.msg_rate_in < 1000  # not adopted yet

    # The broker reports again (samples are taken per report version, not per refresh).
    assert view.cache is not None
    cache, seen = view.cache, view.cache.brokers.versions[BROKER]
    store.put_json(P.broker_path(BROKER), local.to_json_dict())
    wait_for(lambda: view.prefetch(store) or cache.brokers.versions[BROKER] > seen, 10, what="the report")
    assert jobs.write_bundle_data(config, shedder, placement) == 1  # refresh adopts, then writes
    assert view.adopted_long_term_total == 1 and jobs.bundle_data_conflicts == 1
    kept, kept_version = _node(store, bundle)
    assert kept_version == raced_version + 1 == view.expected_version(bundle)
    # The adopted window plus exactly one leader sample of 100 msg/s: the new report's.
    assert kept.long_term_data.msg_rate_in == pytest.approx((999 * MERGED.msg_rate_in + 100.0) / 1000)
    assert kept.short_term_data.num_samples == first.short_term_data.num_samples + 1

    # A node deleted behind the leader's back is created again on the next write.
    store.delete(P.bundle_data_path(bundle))
    assert jobs.write_bundle_data(config, shedder, placement) == 1
    assert _node(store, bundle)[1] == 0 == view.expected_version(bundle)

    # A replaced leader (the epoch moved on) writes nothing, even while it still believes it leads.
    store.bump_epoch("next-leader")
    before = _node(store, bundle)
    assert jobs.write_bundle_data(config, shedder, placement) == 0
    assert _node(store, bundle) == before
