"""ZooKeeper frozen (SIGSTOP) then thawed: while the connection is in doubt the leader decides
nothing; afterwards it re-reads everything, leads again and decides normally."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from service.broker.workload import skewed_scenario
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from tests.integration.conftest import SERVICE_SESSION_S, Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def private_cluster(zk_server: EmbeddedZooKeeper) -> Iterator[Cluster]:
    c = Cluster(zk_server.hosts)
    try:
        yield c
    finally:
        if zk_server.running:
            zk_server.resume()
        c.close()


def test_no_decision_while_suspended_and_normal_after(
    zk_server: EmbeddedZooKeeper, private_cluster: Cluster
) -> None:
    cluster = private_cluster
    config = fast_config()
    cluster.scenario(skewed_scenario("public/default", 4, seed=13))
    cluster.agent("b1:8080", config)
    cluster.agent("b2:8080", config)
    svc = cluster.service("s1:7001", config)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 15, what="every bundle owned")

    zk_server.pause()
    paused_at = time.monotonic()
    wait_for(
        lambda: not svc.is_leader(), SERVICE_SESSION_S + 5, interval=0.05, what="the leader to stand down"
    )
    stood_down_ms = int(time.time() * 1000)
    cycles = svc.jobs.cycles
    decided = len(svc.decisions(limit=10_000))
    time.sleep(max(SERVICE_SESSION_S + 2 - (time.monotonic() - paused_at), 1.0))  # past session expiry
    assert not svc.is_leader()
    assert svc.jobs.cycles == cycles, "a shedding cycle ran while ZooKeeper was unreachable"
    assert len(svc.decisions(limit=10_000)) == decided, "a decision was made while suspended"
    zk_server.resume()
    resumed_ms = int(time.time() * 1000)

    wait_for(svc.is_leader, 30, what="leadership after ZooKeeper came back")
    assert all(not stood_down_ms <= d.time_ms < resumed_ms for d in svc.decisions(limit=10_000))
    # Normal after: agents re-register and re-own, cycles run, and a new namespace gets placed.
    wait_for(lambda: set(cluster.admin.broker_ids()) == {"b1:8080", "b2:8080"}, 30, what="agents back")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 30, what="bundles owned again")
    cycles = svc.jobs.cycles
    wait_for(lambda: svc.jobs.cycles > cycles, 15, what="a shedding cycle after the outage")
    cluster.admin.create_namespace("public/after", 2)
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 15, what="the new namespace placed")
    new = [d for d in svc.decisions(kind="placement") if d.bundle and d.bundle.startswith("public/after/")]
    assert len(new) == 2 and all(d.time_ms >= resumed_ms for d in new)
