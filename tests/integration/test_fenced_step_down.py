"""A leader whose epoch moved on stops leading, says so, and a leader exists again; the two modes
cannot be confused on one ZooKeeper (issue #49, items 1 and 2). Real ZooKeeper, real agents.

The outage these guard against: a Pulsar-mode instance started on the demo's ZooKeeper bumped the
shared leader epoch; the ZooKeeper-native leader kept leading with a stale fence, every write was
refused, ``/readyz`` said ready, and its bundles ended unowned."""

from __future__ import annotations

import time

import pytest

from service.broker.workload import skewed_scenario
from service.errors import ModeMismatch, StaleWrite
from service.leader.election import LeaderElection
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from tests.integration.conftest import SERVICE_SESSION_S, Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration


def _native_cluster(cluster: Cluster) -> LoadManagerService:
    config = fast_config()
    cluster.scenario(skewed_scenario("public/default", 6, seed=11))
    cluster.agent("b1:8080", config)
    cluster.agent("b2:8080", config)
    svc = cluster.service("s1:7001", config)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: svc.ready(), 20, what="the first sync")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    return svc


def _applied_moves(svc: LoadManagerService) -> list[str]:
    return [r.bundle for r in svc.decisions(500) if r.bundle and r.applied is not False]


def test_a_refused_fenced_write_ends_the_term_at_once_and_a_leader_exists_again(cluster: Cluster) -> None:
    svc = _native_cluster(cluster)
    first = svc.election.fence()
    assert first is not None
    # Slow the election thread's own epoch check down, so that the refused write is what notices.
    svc.election._retry_s = 3600.0
    cluster.admin.bump_epoch("intruder", "/nowhere/leader")  # a hand edit, or a bug elsewhere
    bundle = sorted(cluster.bundles())[0]
    owner = cluster.owners()[bundle]
    target = "b2:8080" if owner == "b1:8080" else "b1:8080"
    before = len(_applied_moves(svc))
    with pytest.raises(StaleWrite):
        svc.unload(bundle, target)
    # No decision round-trip, no timer: the refused write itself ended the term.
    assert not svc.is_leader()
    assert svc.election.fence() is None
    assert cluster.owners()[bundle] == owner
    assert len(_applied_moves(svc)) == before, "a move that was not written was reported"
    svc.election._retry_s = 1.0
    svc.election.wake()
    # It gave the node up and campaigned again: it leads under a new epoch, and writes go through.
    wait_for(lambda: svc.is_leader() and svc.election.fence() is not None, 15, what="leading again")
    again = svc.election.fence()
    assert again is not None and again.version > first.version
    assert svc.election.fenced_out_count == 1
    down = [r for r in svc.decisions(100) if r.kind == "leadership"]
    assert down and "superseded" in str(down[0].explanation)
    wait_for(svc.ready, 20, what="ready again")
    svc.unload(bundle, target)
    wait_for(lambda: cluster.owners().get(bundle) == target, 20, what="the unload to land")


def test_a_leader_that_writes_nothing_notices_a_bumped_epoch_within_a_step(cluster: Cluster) -> None:
    svc = _native_cluster(cluster)
    cluster.admin.bump_epoch("intruder", "/nowhere/leader")
    took = wait_for(lambda: svc.election.fenced_out_count == 1, 5, what="the step-down")
    assert took < 5
    wait_for(svc.is_leader, 15, what="leading again")


def test_the_other_mode_cannot_take_the_zookeeper_from_a_leader(cluster: Cluster) -> None:
    """A Pulsar-mode election (``/loadmgr/leader``) next to a ZooKeeper-native leader: it does not
    campaign while the other mode leads. And where one of an older kind did bump the epoch, the
    native leader steps down, waits while that one holds its node, then leads again: the agents'
    bundles stay owned throughout."""
    svc = _native_cluster(cluster)
    other_store = ZkStore(cluster.hosts, session_timeout_s=SERVICE_SESSION_S)
    other_store.start()
    try:
        other = LeaderElection(
            other_store,
            "pulsar-mode:7002",
            "http://127.0.0.1:7002",
            lambda: None,
            lambda: None,
            path=P.LOADMGR_LEADER,
        )
        other.start()
        wait_for(lambda: other.blocked is not None, 10, what="the other mode to hold back")
        assert "s1:7001" in (other.blocked or "")
        time.sleep(1.5)  # several election steps: it stays out
        assert not other.is_leader() and svc.is_leader()
        assert other_store.client.exists(P.LOADMGR_LEADER) is None
        other.stop()

        # An instance that does not hold back (an older loadmgr): it takes its node and bumps the epoch.
        other_store.client.create(P.LOADMGR_LEADER, b"{}", ephemeral=True, makepath=True)
        other_store.bump_epoch("old-pulsar-mode:7003", P.LOADMGR_LEADER)
        wait_for(lambda: not svc.is_leader() and svc.election.blocked is not None, 5, what="step down")
        assert svc.not_ready_reasons() and "not campaigning" in svc.not_ready_reasons()[0]
        assert svc.readiness()["reason"].startswith("not campaigning")
        # That instance exits: the native leader leads again and its agents' bundles stay owned.
        other_store.client.delete(P.LOADMGR_LEADER)
        wait_for(svc.is_leader, 15, what="leading again")
        wait_for(svc.ready, 20, what="ready again")
        wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    finally:
        other_store.stop()


def _service(cluster: Cluster, **settings: object) -> LoadManagerService:
    s = Settings(
        zk_hosts=cluster.hosts,
        zk_chroot="",
        zk_session_timeout_s=SERVICE_SESSION_S,
        instance_id="s9:7009",
        **settings,
    )  # type: ignore[arg-type]
    return LoadManagerService(s, fast_config(), seed=1)


def test_zookeeper_native_mode_refuses_a_pulsar_clusters_zookeeper(cluster: Cluster) -> None:
    # What a Pulsar cluster leaves: its cluster data, BookKeeper's ledgers, its leader broker's node.
    cluster.admin.client.create(
        f"{P.CLUSTERS}/pulsar-a", b'{"serviceUrl":"http://127.0.0.1:8080"}', makepath=True
    )
    cluster.admin.client.create("/ledgers", b"", makepath=True)
    cluster.admin.client.create(
        P.LEADER, b'{"serviceUrl":"http://127.0.0.1:8080"}', ephemeral=True, makepath=True
    )
    svc = _service(cluster)
    with pytest.raises(ModeMismatch, match="--mode pulsar") as e:
        svc.start()
    assert "/ledgers exists" in str(e.value) and "Pulsar broker http://127.0.0.1:8080" in str(e.value)
    # Nothing of loadmgr's was written: no epoch bumped, Pulsar's leader node untouched.
    assert cluster.admin.client.exists(P.LEADER_EPOCH) is None
    assert cluster.admin.client.get(P.LEADER)[0] == b'{"serviceUrl":"http://127.0.0.1:8080"}'
    # Asked for explicitly, it runs (and warns): the operator said so.
    explicit = _service(cluster, mode="zookeeper")
    explicit.start()
    try:
        assert not explicit.is_leader()  # Pulsar's broker holds the node
    finally:
        explicit.stop()


def test_pulsar_mode_refuses_loadmgr_agents(cluster: Cluster) -> None:
    _native_cluster(cluster)
    svc = _service(cluster, mode="pulsar", pulsar_admin_url="http://127.0.0.1:9")
    epoch = cluster.admin.client.exists(P.LEADER_EPOCH)
    with pytest.raises(ModeMismatch, match="--mode zookeeper") as e:
        svc.start()
    assert "loadmgr's own agents" in str(e.value)
    after = cluster.admin.client.exists(P.LEADER_EPOCH)
    assert epoch is not None and after is not None and after.version == epoch.version
    assert cluster.admin.client.exists(P.LOADMGR_LEADER) is None
