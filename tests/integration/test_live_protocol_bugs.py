"""Four protocol bugs of the live leader, agents and launcher, each reproduced on a real ZooKeeper.

* After a failover, reconcile placed orphans with default bundle data (its refresh reads none) and
  the next sampling refresh reported "adopted longTermData from another writer" with no writer.
* An agent whose session expired re-registered with its old bundle list.
* The bundle-data job deleted the time-average node of a broker that registered after its snapshot.
* ``loadmgr zookeeper --port P`` reported "serving" when another server held P.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from balancer.explain import explain
from balancer.models import BundleData, LocalBrokerData, TimeAverageBrokerData
from service.broker.agent import BrokerAgent, SimulatedSource
from service.broker.workload import Scenario
from service.leader.cluster_view import DecisionLog
from service.leader.executors import ZkExecutor
from service.leader.jobs import LeaderJobs
from service.leader.load_view import LoadView, Snapshot
from service.leader.metrics_sink import NoMetrics
from service.leader.service import make_strategies
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.server.launcher import EmbeddedZooKeeper, ZooKeeperLaunchError
from tests.integration.conftest import assign, fast_config, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NS = "live/bugs"


@pytest.fixture
def store(zk_chroot_hosts: str) -> Iterator[ZkStore]:
    s = ZkStore(zk_chroot_hosts, session_timeout_s=5)
    s.start()
    yield s
    s.stop()


def _jobs(store: ZkStore, view: LoadView, decisions: DecisionLog) -> LeaderJobs:
    fence = store.bump_epoch("test-leader")
    executor = ZkExecutor(store, lambda: fence)
    return LeaderJobs(
        store,
        executor,
        executor,
        view,
        decisions,
        NoMetrics(),
        None,
        lambda: True,
        lambda: None,
        random.Random(1),
    )


def test_reconcile_after_failover_places_with_stored_data_and_adopts_nothing(store: ZkStore) -> None:
    (bundle,) = store.create_namespace(NS, 1).bundle_names
    stored = BundleData.default()
    stored.long_term_data.msg_rate_in = 777.0
    store.write_bundle_data(bundle, stored)
    store.register_broker("b1:8080", LocalBrokerData(web_service_url="http://b1:8080"))
    config = fast_config()
    shedder, placement = make_strategies(config)
    decisions = DecisionLog(20)
    adopted = explain("adopted-long-term-data", "what the service records")
    view = LoadView(on_adopt=lambda bundles: decisions.add(0, "adoption", adopted, bundle=bundles[0]))
    jobs = _jobs(store, view, decisions)

    assert jobs.reconcile(config, shedder, placement) == 1  # a new leader's first job
    assert view.load.bundle_data[bundle].long_term_data.msg_rate_in == 777.0  # not the default 50
    assert store.read_assignments()[bundle].value.broker == "b1:8080"

    jobs.write_bundle_data(config, shedder, placement)  # the next sampling refresh
    assert view.adopted_long_term_total == 0
    assert decisions.latest(20, "adoption") == []


def _expire(store: ZkStore) -> None:
    """Expire ``store``'s session the way ZooKeeper does: another client closes it."""
    session_id, password = store.client.client_id
    ghost = KazooClient(hosts=store.hosts, client_id=(session_id, password))
    ghost.start(timeout=10)
    ghost.stop()
    ghost.close()


def test_agent_with_an_expired_session_registers_without_its_old_bundles(zk_chroot_hosts: str) -> None:
    admin = ZkStore(zk_chroot_hosts, session_timeout_s=5)
    admin.start()
    agent_store = ZkStore(zk_chroot_hosts, session_timeout_s=4)
    agent_store.start()
    try:
        bundles = admin.create_namespace(NS, 2).bundle_names
        admin.write_workload(Scenario(namespaces={NS: 2}).model_dump(mode="json"))
        for b in bundles:
            assign(admin, b, "b1:8080", "t")
        source = SimulatedSource(lambda: agent_store.read_workload_as(Scenario.parse))
        agent = BrokerAgent(agent_store, "b1:8080", fast_config(), source, ownership_poll_s=0.2)
        agent.start()
        wait_for(lambda: agent.owned() == set(bundles), 15, what="b1 owns both bundles")
        wait_for(lambda: set(admin.read_brokers()["b1:8080"].bundles) == set(bundles), 10, what="report")
        agent.stop(release=False)  # the loop is driven by hand from here on
        old_session = agent_store.session_id
        # Meanwhile the leader gives both bundles to b2 and b2 takes them.
        for b in bundles:
            assign(admin, b, "b2:8080", "t")
        _expire(agent_store)
        wait_for(
            lambda: agent_store.connected and agent_store.session_id not in (None, old_session),
            20,
            what="a new session",
        )
        for b in bundles:
            assert admin.acquire(b, "b2:8080", {})
        agent._ensure_registered()  # what the loop does first on a new session
        stat = admin.client.exists(P.broker_path("b1:8080"))
        assert stat is not None and stat.ephemeralOwner == agent_store.session_id
        assert admin.read_brokers()["b1:8080"].bundles == set()
        assert agent.owned() == set()
    finally:
        agent_store.stop()
        admin.stop()


def test_bundle_data_job_keeps_time_average_of_a_broker_registered_after_its_snapshot(store: ZkStore) -> None:
    store.create_namespace(NS, 1)
    store.register_broker("b1:8080", LocalBrokerData(web_service_url="http://b1:8080"))
    late = ZkStore(store.hosts, session_timeout_s=5)
    late.start()
    try:
        config = fast_config()
        shedder, placement = make_strategies(config)
        view = LoadView()
        jobs = _jobs(store, view, DecisionLog(5))
        snapshot: Callable[..., Snapshot] = view.snapshot

        def snapshot_then_register(*args: object, **kw: object) -> Snapshot:
            # runs inside the refresh: the brokers are read (from the watch cache), then b2 registers
            view.snapshot = snapshot  # type: ignore[method-assign]
            snap = snapshot(*args, **kw)
            late.register_broker("b2:8080", LocalBrokerData(web_service_url="http://b2:8080"))
            late.write_time_average("b2:8080", TimeAverageBrokerData())
            return snap

        view.snapshot = snapshot_then_register  # type: ignore[method-assign]
        jobs.write_bundle_data(config, shedder, placement)
        assert "b2:8080" not in (view.last.brokers if view.last else {})  # it really came after the snapshot
        assert store.client.exists(P.time_average_path("b2:8080")) is not None
        # A broker really gone still loses its node.
        store.write_time_average("gone:1", TimeAverageBrokerData())
        jobs.write_bundle_data(config, shedder, placement)
        assert store.client.exists(P.time_average_path("gone:1")) is None
        assert store.client.exists(P.time_average_path("b2:8080")) is not None
    finally:
        late.stop()


def test_zookeeper_on_a_taken_port_fails_instead_of_reporting_serving() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(ZooKeeperLaunchError, match=f"port {port}"):
            EmbeddedZooKeeper(port=port).start(timeout=20)
        proc = subprocess.run(
            [sys.executable, "-m", "service", "zookeeper", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
    assert proc.returncode == 1, proc
    assert "serving" not in proc.stdout and "already in use" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
