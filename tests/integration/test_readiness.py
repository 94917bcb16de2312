"""Readiness that means it: a leader whose job fails three runs in a row is not ready (with the
reason), counts the failures in loadmgr_job_failures_total{job}, and is ready again after one
successful run. A follower's readiness does not depend on the leader's jobs."""

from __future__ import annotations

from typing import Any

import pytest

from service.api.metrics import PrometheusMetrics
from service.broker.workload import Scenario
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
