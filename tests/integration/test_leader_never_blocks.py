"""Plan / write / apply: while a leader job waits for its ZooKeeper batches, the service lock is free,
so manual operations, config updates and dry runs never wait for a cycle's writes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import service.leader.jobs as jobs_module
from service.broker.workload import Scenario
from service.zookeeper import paths as P
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration


def _in_thread(fn: Callable[[], Any], timeout: float = 10.0) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "blocked behind the job's writes"
    return out[0]


def test_manual_operations_do_not_wait_for_a_jobs_writes(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = fast_config()
    cluster.scenario(Scenario(namespaces={"first/ns": 2}))
    cluster.agent("b1:8080", config)
    cluster.agent("b2:8080", config)
    svc = cluster.service("s1:7041", config)
    wait_for(svc.ready, 20, what="a ready leader")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")

    entered, release = threading.Event(), threading.Event()
    real = jobs_module.commit_batches

    def held(store: Any, ops: Any, fence: Any, *a: Any, **kw: Any) -> Any:
        if any(op.path.startswith(P.ASSIGNMENTS + "/late/") for op in ops):
            entered.set()
            assert release.wait(30)
        return real(store, ops, fence, *a, **kw)

    monkeypatch.setattr(jobs_module, "commit_batches", held)
    late = cluster.admin.create_namespace("late/ns", 4).bundle_names  # orphans: the reconcile places them
    wait_for(entered.is_set, 20, what="a job writing the new bundles' assignments")
    try:
        assert set(late) <= svc.jobs.in_flight
        # Meanwhile: a manual unload, a config update and a dry run all go through.
        moved = sorted(cluster.bundles() - set(late))[0]
        dest = "b2:8080" if cluster.owners()[moved] == "b1:8080" else "b1:8080"
        record = _in_thread(lambda: svc.unload(moved, dest, principal="test"))
        assert record.destination == dest
        _in_thread(lambda: svc.update_config({"loadBalancerBrokerOverloadedThresholdPercentage": 84}))
        assert svc.config.loadBalancerBrokerOverloadedThresholdPercentage == 84
        _in_thread(svc.dry_run)
        assert _in_thread(svc.view) is not None
    finally:
        release.set()
    wait_for(lambda: set(late) <= set(cluster.owners()), 20, what="the held bundles placed and owned")
    wait_for(lambda: cluster.owners().get(moved) == dest, 20, what="the manual move done")
    assert not (set(late) & svc.jobs.in_flight)
