"""Shutting down while ZooKeeper is dead (killed) or frozen (SIGSTOP): every shutdown call to ZooKeeper
has a deadline, so the leader and the agents stop within a few seconds instead of retrying for ever."""

from __future__ import annotations

import time

import pytest

from service.broker.workload import skewed_scenario
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

# Generous against a loaded 2-core machine, yet far below kazoo's unbounded retry.
STOP_BOUND_S = 8.0


@pytest.mark.parametrize("outage", ["killed", "frozen"])
def test_leader_and_agent_stop_promptly_with_zookeeper_gone(
    zk_server: EmbeddedZooKeeper, outage: str
) -> None:
    cluster = Cluster(zk_server.hosts)
    try:
        config = fast_config()
        cluster.scenario(skewed_scenario("public/default", 4, seed=3))
        agent = cluster.agent("b1:8080", config)
        svc = cluster.service("s1:7001", config)
        wait_for(svc.is_leader, 15, what="leadership")
        wait_for(lambda: len(agent.owned()) == 4, 15, what="every bundle owned")
        if outage == "killed":
            zk_server.stop()
        else:
            zk_server.pause()
        time.sleep(0.5)  # let the clients notice: their state is SUSPENDED or reconnecting
        started = time.monotonic()
        svc.stop()
        svc_took = time.monotonic() - started
        started = time.monotonic()
        agent.stop(release=True)
        agent.store.stop()
        cluster.agents.pop("b1:8080")
        agent_took = time.monotonic() - started
        assert svc_took < STOP_BOUND_S, f"leader took {svc_took:.1f} s to stop"
        assert agent_took < STOP_BOUND_S, f"agent took {agent_took:.1f} s to stop"
    finally:
        if zk_server.running and zk_server.paused:
            zk_server.resume()
        cluster.services.clear()
        cluster.close()
