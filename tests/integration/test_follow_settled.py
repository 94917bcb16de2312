"""Following a plan written whole (issue 49, item 13): with tens of thousands of moves in flight, the
move tick looks again only at the moves whose ownership node changed since the last tick (the watch-fed
tree's journal), not at every one every second; a change of the live brokers looks at all again.

The cluster is written by bench/raw_populate.py's raw kazoo clients (Pulsar's node shapes, no loadmgr
agent): no destination ever takes a bundle by itself, so every move stays with its source until the
test writes an ownership node the way a destination broker would."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.pacing import BUDGET_KEYS
from bench.live_population import RawPopulation
from bench.raw_populate import Cluster as RawCluster
from service.leader.cluster_view import DecisionLog
from service.leader.executors import ZkExecutor
from service.leader.jobs import LeaderJobs
from service.leader.load_view import LoadView
from service.leader.metrics_sink import NoMetrics
from service.leader.move_queue import MoveRequest
from service.leader.service import make_strategies
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from tests.integration.conftest import wait_for

pytestmark = pytest.mark.integration

OFF = dict.fromkeys(BUDGET_KEYS, 0)


@pytest.fixture
def raw(zk_chroot_hosts: str) -> Iterator[tuple[RawPopulation, ZkStore]]:
    cluster = RawPopulation(zk_chroot_hosts, brokers=6, bundles=80, namespaces=2)
    leader = ZkStore(zk_chroot_hosts, session_timeout_s=10)
    leader.start()
    try:
        yield cluster, leader
    finally:
        leader.stop()
        cluster.close()


def test_a_tick_looks_only_at_the_moves_whose_owner_changed(
    raw: tuple[RawPopulation, ZkStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, store = raw
    fence = store.bump_epoch("test-leader")
    view = LoadView()
    executor = ZkExecutor(store, lambda: fence)
    jobs = LeaderJobs(
        store, executor, executor, view, DecisionLog(100), NoMetrics(), None,
        lambda: True, lambda: fence.version, random.Random(1),
    )  # fmt: skip
    config = LoadBalancerConfig.from_dict(OFF)
    snap = view.refresh(store, 0, make_strategies(config))
    brokers = sorted(snap.brokers)
    owned = sorted(b for b, o in snap.owners.items() if o.broker)
    moves = {b: next(x for x in brokers if x != snap.owners[b].broker) for b in owned[:30]}
    jobs.moves.submit(
        [MoveRequest(b, snap.owners[b].broker, d, explain("test", "", subject=b)) for b, d in moves.items()],
        "shedding",
    )
    assert jobs.move_tick(config) == 30  # written whole: 30 in flight, each still on its source

    looked: list[str] = []
    follow = jobs._follow

    def counted(e: Any, *a: Any) -> int:
        looked.append(e.bundle)
        return follow(e, *a)

    monkeypatch.setattr(jobs, "_follow", counted)
    jobs.move_tick(config)
    assert len(looked) == 30  # the first look after the write: every move
    looked.clear()
    jobs.move_tick(config)
    jobs.move_tick(config)
    assert looked == []  # nothing changed: nothing looked at again
    assert len(jobs.moves.in_flight()) == 30

    # The destination of one move takes its bundle (its broker writes the ownership node).
    bundle = owned[3]
    path = P.ownership_path(bundle)
    store.client.set(path, json.dumps(RawCluster.owner_node(moves[bundle])).encode())
    wait_for(lambda: (jobs.move_tick(config), looked)[1] != [], 10, what="the changed owner looked at")
    assert set(looked) == {bundle}
    assert jobs.moves.get_in_flight(bundle) is None and len(jobs.moves.in_flight()) == 29  # served

    # A broker leaves: every move is looked at again (a destination may be gone).
    looked.clear()
    cluster.write_reports([])  # a no-op round trip: the populator is alive
    gone = next(
        b for b in brokers if b not in moves.values() and b not in {snap.owners[x].broker for x in moves}
    )
    store.client.delete(P.broker_path(gone))
    wait_for(lambda: (jobs.move_tick(config), looked)[1] != [], 10, what="a full look after the broker left")
    assert len(set(looked)) == 29
