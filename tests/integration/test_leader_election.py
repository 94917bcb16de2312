"""Leader election on a real ZooKeeper: exactly one leader among two instances; when the leader's
process is killed the other leads within the session timeout plus one interval; leadership is
never held by two instances at once, and a replaced leader's writes are fenced off."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from service.broker.workload import skewed_scenario
from service.errors import NotLeader, StaleWrite
from service.zookeeper import paths as P
from tests.integration.conftest import FAST, ROOT, SERVICE_SESSION_S, Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

INTERVAL_S = FAST["loadBalancerSheddingIntervalMinutes"] * 60

# A service in its own process, so that it can really be killed (SIGKILL: no goodbye to ZooKeeper).
SERVICE_MAIN = """
import sys, time
from balancer.config import LoadBalancerConfig
from service.leader.service import LoadManagerService
from service.settings import Settings
import json
hosts, instance, session, config = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
s = Settings(zk_hosts=hosts, zk_chroot="", zk_session_timeout_s=session, instance_id=instance)
svc = LoadManagerService(s, LoadBalancerConfig.from_dict(config), seed=2)
svc.start()
while True:
    time.sleep(1)
"""


@pytest.fixture
def killable_service(cluster: Cluster) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SERVICE_MAIN,
            cluster.hosts,
            "s0:7000",
            str(SERVICE_SESSION_S),
            json.dumps(FAST),
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=5)


def leader_id(cluster: Cluster) -> str | None:
    got = cluster.admin.get_json(P.LEADER)
    return None if got is None else got.value.get("brokerId")


def test_killed_leader_is_replaced_within_session_timeout_plus_interval(
    cluster: Cluster, killable_service: subprocess.Popen[bytes]
) -> None:
    config = fast_config()
    cluster.scenario(skewed_scenario("public/default", 6, seed=5))
    for b in ("b1:8080", "b2:8080", "b3:8080"):
        cluster.agent(b, config)
    wait_for(lambda: leader_id(cluster) == "s0:7000", 30, what="the subprocess to lead")
    follower = cluster.service("s1:7001", config)
    wait_for(follower.ready, 10)
    time.sleep(INTERVAL_S)  # let the follower's election thread see the existing leader
    assert not follower.is_leader() and leader_id(cluster) == "s0:7000"
    with pytest.raises(NotLeader) as e:
        follower.unload(next(iter(cluster.bundles())))
    assert e.value.leader_url is not None  # the caller is told where the leader is
    wait_for(
        lambda: set(cluster.owners()) == cluster.bundles(), 20, what="the first leader placed everything"
    )

    killable_service.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    took = wait_for(follower.is_leader, SERVICE_SESSION_S + INTERVAL_S + 10, what="the follower to lead")
    assert took <= SERVICE_SESSION_S + INTERVAL_S + 6  # slack for a loaded 2-core machine
    elected_ms = int(time.time() * 1000) - int((time.monotonic() - killed_at - took) * 1000)
    assert leader_id(cluster) == "s1:7001"
    epoch = follower.election.fence()
    assert epoch is not None and epoch.version >= 1
    # The new leader works: cycles run and every decision carries its own epoch.
    wait_for(lambda: follower.jobs.cycles >= 1, 3 * INTERVAL_S + 5, what="a shedding cycle by the new leader")
    for d in follower.decisions():
        assert d.explanation["numbers"]["leaderEpoch"] == epoch.version
        assert d.time_ms >= elected_ms - 1000


def test_exactly_one_leader_at_any_time_and_stale_leader_is_fenced(cluster: Cluster) -> None:
    config = fast_config()
    cluster.scenario(skewed_scenario("public/default", 4, seed=9))
    cluster.agent("b1:8080", config)
    a = cluster.service("s1:7001", config)
    b = cluster.service("s2:7002", config)
    both: list[float] = []
    halt = threading.Event()

    def sample() -> None:
        while not halt.is_set():
            if a.is_leader() and b.is_leader():
                both.append(time.monotonic())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    wait_for(lambda: a.is_leader() or b.is_leader(), 15, what="a leader")
    first, second = (a, b) if a.is_leader() else (b, a)
    assert leader_id(cluster) == first.instance_id
    old_fence = first.election.fence()
    assert old_fence is not None
    first.stop()  # graceful: the leader node is deleted, the other wins at once
    wait_for(second.is_leader, 10, what="hand-over")
    halt.set()
    sampler.join()
    assert not both, "two instances believed they were leader at the same time"
    # A write fenced on the old leader's epoch is refused: a stale leader cannot move bundles.
    bundle = next(iter(cluster.bundles()))
    with pytest.raises(StaleWrite):
        cluster.admin.fenced(old_fence).upsert_json(P.assignment_path(bundle), {"broker": "x"}).commit()
    assert (cluster.admin.get_json(P.assignment_path(bundle)) or None) is None or (
        cluster.admin.get_json(P.assignment_path(bundle)).value["broker"] != "x"  # type: ignore[union-attr]
    )
