"""Readiness that means it: a leader whose job fails three runs in a row is not ready (with the
reason), counts the failures in loadmgr_job_failures_total{job}, and is ready again after one
successful run. A follower's readiness does not depend on the leader's jobs."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import pytest

from service.api.metrics import PrometheusMetrics
from service.broker.workload import Scenario
from service.leader import heap
from service.leader.service import LoadManagerService
from service.settings import Settings
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration


FAILED_BUNDLE_DATA = {"cluster": "standalone", "job": "bundle-data"}


def test_consecutive_job_failures_make_the_leader_unready(cluster: Cluster) -> None:
    config = fast_config()
    cluster.scenario(Scenario(namespaces={"ready/ns": 2}))
    cluster.agent("b1:8080", config)
    metrics = PrometheusMetrics()
    svc = cluster.service("s1:7031", config, metrics=metrics)
    follower = cluster.service("s2:7032", config)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(svc.ready, 10, what="the leader ready")
    assert follower.ready()

    def broken(*_: Any) -> None:
        raise ZeroDivisionError("what a poison node used to cause")

    for n in range(1, 4):
        svc._leader_job("bundle-data", broken)
        assert svc.job_failures["bundle-data"] == n
    assert not svc.ready()
    assert svc.not_ready_reasons() == ["bundle-data job failed 3 times in a row"]
    assert metrics.registry.get_sample_value("loadmgr_job_failures_total", FAILED_BUNDLE_DATA) == 3
    assert follower.ready()  # not the follower's job

    svc._leader_job("bundle-data", svc.jobs.write_bundle_data)  # one good run clears it
    assert svc.ready(), svc.not_ready_reasons()
    assert metrics.registry.get_sample_value("loadmgr_job_failures_total", FAILED_BUNDLE_DATA) == 3


def test_a_leader_whose_jobs_stall_is_unready_until_a_cycle_runs(cluster: Cluster) -> None:
    # 0.6 s shedding interval: stale after 3 intervals plus the 5 s start-up slack, i.e. ~6.8 s.
    config = fast_config(loadBalancerSheddingIntervalMinutes=0.01)
    cluster.scenario(Scenario(namespaces={"stale/ns": 2}))
    cluster.agent("b1:8080", config)
    svc = cluster.service("s1:7033", config)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: svc.jobs.cycles > 0 and svc.ready(), 10, what="a first cycle")
    with svc._lock:  # every job waits for the lock: the view stops being refreshed
        wait_for(lambda: not svc.ready(), 15, what="unready while stalled")
        assert any("no successful shedding cycle" in r for r in svc.not_ready_reasons())
    wait_for(svc.ready, 10, what="ready after the next cycle")


def test_a_new_leader_is_unready_until_its_first_sync_and_reconcile_and_skips_no_run(
    cluster: Cluster,
) -> None:
    # The first sync at 100,000 bundles takes longer than the reconcile interval: here it is held
    # for several reconcile intervals (0.3 s shedding interval, reconcile every 0.15 s).
    config = fast_config(loadBalancerSheddingIntervalMinutes=0.005)
    cluster.scenario(Scenario(namespaces={"first/ns": 2}))
    cluster.agent("b1:8080", config)
    metrics = PrometheusMetrics()
    settings = Settings(
        zk_hosts=cluster.hosts, zk_chroot="", zk_session_timeout_s=4.0, instance_id="s1:7034", http_port=7034
    )
    svc = LoadManagerService(settings, config, metrics=metrics, seed=1)
    release = threading.Event()
    entered = threading.Event()
    reconcile = svc.jobs.reconcile

    def slow_first_reconcile(*args: Any) -> int:
        entered.set()
        release.wait(30)
        return reconcile(*args)

    svc.jobs.reconcile = slow_first_reconcile  # type: ignore[method-assign]
    svc.start()
    cluster.services.append(svc)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(entered.is_set, 10, what="the first reconcile")
    time.sleep(1.0)  # several reconcile and shedding intervals: nothing else may run meanwhile
    assert not svc.ready()
    assert svc.not_ready_reasons() == [
        "leading, but the first full sync of ZooKeeper and first reconcile are not done"
    ]
    assert svc.readiness()["synced"] is False
    assert svc.jobs.cycles == 0
    frozen = gc.get_freeze_count()
    release.set()
    wait_for(svc.ready, 10, what="ready after the first reconcile")
    # The term's view is out of the collector's full passes from now on (service/leader/heap.py).
    assert gc.get_freeze_count() > frozen and gc.get_threshold() == heap.LEADING_THRESHOLDS
    wait_for(lambda: svc.jobs.cycles > 0, 10, what="the schedule to run after the sync")
    skipped = {
        (job, why): n for (job, why), n in svc._schedule.runs.items() if why in ("missed", "max_instances")
    }
    assert skipped == {}
    wall = metrics.registry.get_sample_value(
        "loadmgr_leader_job_run_duration_seconds_sum", {"cluster": "standalone", "job": "reconcile"}
    )
    assert wall is not None and wall >= 1.0  # the held first run counts whole
