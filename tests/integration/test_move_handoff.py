"""Moves without an ownership gap, and agents that read only what changed (``docs/ownership.md``).

Real ZooKeeper (a private server, so its transaction log can be read), real agents: the moves are
written as the leader writes them (fenced batches, each assignment with its hint), and the unowned
time of every move is measured from ZooKeeper's transaction log: the old owner's delete of the
ownership node to the new owner's create.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from service.broker.agent import BrokerAgent
from service.broker.handoff import HANDOFF_IN_FLIGHT, HANDOFF_WAIT_S
from service.broker.requests import AGENT_BULK_MIN
from service.broker.workload import Scenario
from service.leader.executors import ZkExecutor
from service.zookeeper import paths as P
from service.zookeeper.forensics.audit import audit
from service.zookeeper.forensics.handoff import handoffs
from service.zookeeper.forensics.txnlog import merged_history
from service.zookeeper.server.launcher import EmbeddedZooKeeper, ZooKeeperLaunchError
from service.zookeeper.session import bulk
from tests.integration.conftest import Cluster, OwnershipChecker, assign, fast_config, wait_for
from tests.timing import scaled

pytestmark = pytest.mark.integration

NS = "t/moves"
BUNDLES = 16
ROUNDS = 4
B1, B2, B3 = "b1:8080", "b2:8080", "b3:8080"


@pytest.fixture
def zk_with_log(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    try:
        with EmbeddedZooKeeper(data_dir=tmp_path / "zk") as zk:
            yield zk
    except ZooKeeperLaunchError as e:
        pytest.fail(f"no ZooKeeper: {e}")


def _requests(agents: list[BrokerAgent]) -> int:
    return sum(a.follower.requests for a in agents)


def test_moves_hand_over_at_once_and_idle_agents_read_nothing(
    zk_with_log: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    cluster = Cluster(zk_with_log.hosts)
    checker = OwnershipChecker(cluster)
    try:
        config = fast_config()
        cluster.scenario(Scenario(namespaces={NS: BUNDLES}))
        bundles = sorted(cluster.bundles())
        for b in bundles:
            assign(cluster.admin, b, B1)
        agents = [cluster.agent(b, config) for b in (B1, B2, B3)]
        wait_for(lambda: cluster.agents[B1].owned() == set(bundles), 20, what="b1 owns every bundle")
        checker.start()
        epoch = cluster.admin.bump_epoch("test-leader")
        executor = ZkExecutor(cluster.admin, lambda: epoch)

        # Idle: with nothing changing, no agent sends ZooKeeper a single ownership request.
        def rounds(n: int) -> None:
            steps = [a.follower.steps for a in agents]
            wait_for(
                lambda: all(a.follower.steps >= s + n for a, s in zip(agents, steps, strict=True)),
                20,
                what=f"{n} more rounds of every agent",
            )

        rounds(2)  # the start settles (the last takes arm their watches)
        settled = _requests(agents)
        rounds(5)
        assert _requests(agents) == settled, "an idle agent read ZooKeeper"

        moves = 0
        for i in range(ROUNDS):
            src, dst = (B1, B2) if i % 2 == 0 else (B2, B1)
            before = _requests(agents)
            current = cluster.admin.read_assignments()
            result = executor.unload_many(((b, src, dst, "test move") for b in bundles), current)
            assert len(result.done) == BUNDLES and not result.refused
            wait_for(lambda dst=dst: cluster.agents[dst].owned() == set(bundles), 20, what=f"{dst} owns all")
            wait_for(lambda src=src: not cluster.agents[src].owned(), 20, what=f"{src} released all")
            moves += BUNDLES
            # O(moves): a bounded number of requests per move, whatever else is in ZooKeeper.
            spent = _requests(agents) - before
            # Two agents take part in each move: the new owner reads the assignment, looks at the old
            # node (its watch), takes, re-arms; the old owner reads the assignment, looks at the ready
            # node (once more if it was not there yet), checks and deletes its own; ready nodes and
            # hint deletes go many to a transaction (service/broker/requests.py): 10.6-12.5 per move.
            assert spent <= 15 * BUNDLES, f"{spent} requests for {BUNDLES} moves"
        # Every release of a move went through the handoff gate (service/broker/handoff.py).
        gate = sum(a.follower.handoffs_awaited + a.follower.handoffs_timed_out for a in agents)
        assert gate == moves, f"{gate} gated releases for {moves} moves"
        # b3 was given nothing: it never read a single assignment.
        assert cluster.agents[B3].follower.requests <= 3
        checker.stop()
        assert checker.violations == []
        assert not cluster.agents[B3].owned()
    finally:
        cluster.close()

    history = merged_history(sorted((tmp_path / "zk").glob("version-2/log.*"))).txns
    report = audit(history)
    assert report.double_owners == []
    got = handoffs(history)
    print("handoffs", got.summary())
    assert len(got.gaps_ms) == moves
    assert got.pending == 0
    p50, p99 = got.percentile(0.5), got.percentile(0.99)
    assert p50 is not None and p99 is not None
    # Targets (docs/ownership.md) on a quiet machine: p50 <= 50 ms, p99 <= 250 ms (2 / 6 ms measured
    # quiet, 2026-11-27). The polling agent this replaces waited for its next poll, about half its period
    # per move (300 ms polls here: ~150 ms). Stretched by the machine's load like every budget of the
    # suite (tests/timing.py): with both cores kept busy the same handoffs took p50 57 ms.
    assert p50 <= 1000 * scaled(0.050), got.summary()
    assert p99 <= 1000 * scaled(0.250), got.summary()


def _b1_owns_two(
    cluster: Cluster, ns: str, start_b2: bool = True, count: int = 2
) -> tuple[list[str], BrokerAgent, BrokerAgent | None, ZkExecutor]:
    """``count`` bundles of ``ns`` owned by b1's agent, b2's agent idle (or not started), and an executor."""
    config = fast_config()
    cluster.scenario(Scenario(namespaces={ns: count}))
    bundles = sorted(cluster.bundles())
    for b in bundles:
        assign(cluster.admin, b, B1)
    src = cluster.agent(B1, config)
    dst = cluster.agent(B2, config) if start_b2 else None
    wait_for(lambda: src.owned() == set(bundles), 20, what=f"b1 owns the {count} bundles")
    epoch = cluster.admin.bump_epoch("test-leader")
    return bundles, src, dst, ZkExecutor(cluster.admin, lambda: epoch)


def test_a_release_cut_off_by_a_connection_loss_is_finished_after(cluster: Cluster) -> None:
    """The old owner stops serving, then its delete of the ownership node meets a connection loss
    (the member it talks to dies, as in the ensemble test): the session lives on, so the node does
    too, and the new owner waits on it. The release must be finished once the step runs again."""
    bundles, src, dst, executor = _b1_owns_two(cluster, "t/cut")
    assert dst is not None
    client = src.follower._store.client
    real_delete = client.delete_async
    failed: list[str] = []

    def delete_once_lost(path: str, version: int = -1) -> object:
        if not failed and P.OWNERSHIP in path:
            failed.append(path)
            lost = client.handler.async_result()
            lost.set_exception(ConnectionLoss())
            return lost
        return real_delete(path, version=version)

    client.delete_async = delete_once_lost  # type: ignore[method-assign]
    executor.unload(bundles[0], B1, B2, "test move")
    wait_for(lambda: bool(failed), 20, what="the release's delete to meet the connection loss")
    wait_for(lambda: bundles[0] in dst.owned(), 20, what=f"{B2} to take {bundles[0]} after the cut release")
    assert bundles[0] not in src.owned() and bundles[1] in src.owned()


def test_a_bundle_moved_away_while_serving_was_stopped_is_still_released(cluster: Cluster) -> None:
    """Cut off long enough, an agent stops serving (its session may expire); if the session lives on,
    its nodes do too. A bundle moved away meanwhile must still be released when the agent is back,
    though it is no longer among those it serves (the ensemble test's move waited forever on one)."""
    bundles, src, dst, executor = _b1_owns_two(cluster, "t/cutoff")
    assert dst is not None
    src.follower.stop_serving()  # what the agent does after a third of its session timeout cut off
    with src.follower._lock:  # its next step sees the stop and the move together
        executor.unload(bundles[0], B1, B2, "test move")
    wait_for(lambda: bundles[0] in dst.owned(), 20, what=f"{B2} to take {bundles[0]}")
    wait_for(lambda: src.owned() == {bundles[1]}, 20, what="b1 serving the bundle still assigned to it")


def test_the_old_owner_serves_until_the_next_owner_is_ready(cluster: Cluster) -> None:
    """A bundle moved to a broker whose agent is not there yet stays served where it is (no gap)
    until the bounded wait ends; then it is let go, and the next owner takes it once it comes."""
    bundles, src, _, executor = _b1_owns_two(cluster, "t/ready", start_b2=False)  # b2 not there yet
    now = [0.0]
    src.follower._clock = lambda: now[0]  # the wait's clock, moved by hand: no sleeping on it
    executor.unload(bundles[0], B1, B2, "test move")
    wait_for(lambda: bundles[0] in src.follower._awaiting, 20, what="b1 to wait for b2's ready node")
    steps = src.follower.steps
    wait_for(lambda: src.follower.steps >= steps + 3, 20, what="three more steps of b1")
    assert src.owned() == set(bundles), "b1 let go before b2 was ready"
    assert src.follower.handoffs_timed_out == 0
    now[0] += HANDOFF_WAIT_S
    wait_for(lambda: src.owned() == {bundles[1]}, 20, what="b1 to let go once the wait ended")
    assert src.follower.handoffs_timed_out == 1 and src.follower.handoffs_awaited == 0
    late = cluster.agent(B2, fast_config())
    wait_for(lambda: late.owned() == {bundles[0]}, 20, what="b2 to take the bundle when it comes")


def test_a_ready_next_owner_gets_the_bundle_without_waiting_out_the_bound(cluster: Cluster) -> None:
    bundles, src, dst, executor = _b1_owns_two(cluster, "t/go")
    assert dst is not None
    src.follower._clock = lambda: 0.0  # the bound never ends: only the ready node can free the bundle
    executor.unload(bundles[0], B1, B2, "test move")
    wait_for(lambda: dst.owned() == {bundles[0]}, 20, what="b2 to take the bundle")
    assert src.owned() == {bundles[1]}
    assert (src.follower.handoffs_awaited, src.follower.handoffs_timed_out) == (1, 0)
    # the ready node is gone once taken: a later move of the bundle starts from nothing
    wait_for(
        lambda: not cluster.admin.client.get_children(P.HANDOFF), 20, what="b2's ready node to be deleted"
    )


def test_the_old_owner_lets_go_of_a_few_ready_bundles_at_a_time(cluster: Cluster) -> None:
    """Every moved bundle's next owner is ready (the test plays it: its "ready" nodes, no take): the
    old owner lets go of HANDOFF_IN_FLIGHT of them and keeps serving the others; each take (the
    ready node deleted, as the next owner's take transaction does) lets one more go."""
    count = HANDOFF_IN_FLIGHT + 2
    bundles, src, _, executor = _b1_owns_two(cluster, "t/paced", start_b2=False, count=count)
    src.follower._clock = lambda: 0.0  # no bound ever ends: only the ready nodes decide
    client = cluster.admin.client
    client.ensure_path(P.HANDOFF)
    ready: dict[str, str] = {}
    for bundle in bundles:
        executor.unload(bundle, B1, B2, "test move")
        _, stat = client.get(P.assignment_path(bundle))
        ready[bundle] = client.create(P.handoff_path(bundle, stat.version), b"", ephemeral=True)
    wait_for(lambda: len(src.owned()) == count - HANDOFF_IN_FLIGHT, 20, what="b1 to let go of the first ones")
    steps = src.follower.steps
    wait_for(lambda: src.follower.steps >= steps + 3, 20, what="three more steps of b1")
    assert len(src.owned()) == count - HANDOFF_IN_FLIGHT, "let go of more than the slots while none was taken"
    let_go = sorted(set(bundles) - src.owned())
    for bundle in let_go:
        assert client.exists(P.ownership_path(bundle)) is None  # released: its node deleted
    # A watch used up by a change (SetWatches fires at once for a node newer than its zxid): the old
    # owner must look again, or the take below would go unseen and hold its slot for good.
    client.set(ready[let_go[0]], b"changed")
    client.delete(ready[let_go[0]])  # one take
    wait_for(lambda: len(src.owned()) == count - HANDOFF_IN_FLIGHT - 1, 20, what="b1 to let go of one more")
    steps = src.follower.steps
    wait_for(lambda: src.follower.steps >= steps + 3, 20, what="three more steps of b1")
    assert len(src.owned()) == count - HANDOFF_IN_FLIGHT - 1
    taken = {let_go[0]}
    while len(taken) < count:  # the next owner takes whatever was let go: the rest follows, a slot at a time
        wait_for(
            lambda done=frozenset(taken): bool(set(bundles) - src.owned() - done),
            20,
            what="b1 to let go of another",
        )
        moving = sorted(set(bundles) - src.owned() - taken)
        assert len(moving) <= HANDOFF_IN_FLIGHT, moving
        for bundle in moving:
            client.delete(ready[bundle])
        taken |= set(moving)
    assert not src.owned()
    assert (src.follower.handoffs_awaited, src.follower.handoffs_timed_out) == (count, 0)


def test_a_bundle_waiting_for_a_slot_is_not_let_go_by_the_bound(cluster: Cluster) -> None:
    """The bound is on the wait for "ready", not for a slot: bundles whose next owner is ready but
    whose slot has not come stay served, even once a resync makes the old owner look at them again."""
    count = 2 * HANDOFF_IN_FLIGHT + 2
    bundles, src, _, executor = _b1_owns_two(cluster, "t/slots", start_b2=False, count=count)
    now = [0.0]
    src.follower._clock = lambda: now[0]  # moved by hand
    client = cluster.admin.client
    client.ensure_path(P.HANDOFF)
    for bundle in bundles:
        executor.unload(bundle, B1, B2, "test move")
        _, stat = client.get(P.assignment_path(bundle))
        client.create(P.handoff_path(bundle, stat.version), b"", ephemeral=True)
    wait_for(lambda: len(src.owned()) == count - HANDOFF_IN_FLIGHT, 20, what="b1 to fill its slots")
    # Every other bundle seen ready before the clock moves (one looked at before its ready node was
    # there is still on its wait for "ready", which the clock would end).
    rest = count - HANDOFF_IN_FLIGHT
    wait_for(lambda: len(src.follower._ready_seen) == rest, 20, what="b1 to see the rest ready")
    now[0] += 10 * HANDOFF_WAIT_S  # no take shows: the slots come back after the bound, once
    wait_for(lambda: len(src.owned()) == count - 2 * HANDOFF_IN_FLIGHT, 20, what="the slots to come back")
    steps = src.follower.steps
    wait_for(lambda: src.follower.steps >= steps + 3, 20, what="three more steps of b1")
    src.follower.resync()  # as after a connection gap: every ready and let-go bundle looked at again
    steps = src.follower.steps
    wait_for(lambda: src.follower.steps >= steps + 3, 20, what="three more steps of b1")
    assert len(src.owned()) == count - 2 * HANDOFF_IN_FLIGHT, "let go while no take showed"
    # A waiting bundle's next owner goes (its ready node with it): the wait for "ready" starts afresh
    # there, it does not inherit the time spent waiting for a slot.
    gone = sorted(src.owned())[0]
    client.delete(P.handoff_path(gone, client.get(P.assignment_path(gone))[1].version))
    steps = src.follower.steps
    wait_for(lambda: src.follower.steps >= steps + 3, 20, what="three more steps of b1")
    assert gone in src.owned() and src.follower.handoffs_timed_out == 0
    now[0] += HANDOFF_WAIT_S
    wait_for(lambda: gone not in src.owned(), 20, what="b1 to let go of it once its own wait ended")
    assert src.follower.handoffs_timed_out == 1


def test_many_moves_at_once_are_read_and_watched_in_bulk(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent handed more than AGENT_BULK_MIN bundles in one step reads their assignments, and
    looks at their ownership nodes, with multiRead + SetWatches; the watches left that way still
    drive every move: the old owner's assignment watches, the new owner's watches on the old nodes."""
    calls: list[tuple[int, bool]] = []
    real = bulk.get_with_watches

    def counted(client: Any, paths: Any, watch: Any, timeout: float, absent_too: bool = False) -> Any:
        calls.append((len(paths), absent_too))
        return real(client, paths, watch, timeout, absent_too)

    monkeypatch.setattr(bulk, "get_with_watches", counted)
    count = AGENT_BULK_MIN + 4
    bundles, src, dst, executor = _b1_owns_two(cluster, "t/bulk", count=count)
    assert dst is not None
    assert (count, False) in calls and (count, True) in calls, calls  # b1's first reads and looks
    moved = bundles[: AGENT_BULK_MIN + 1]
    calls.clear()
    current = cluster.admin.read_assignments()
    result = executor.unload_many([(b, B1, B2, "test move") for b in moved], current)  # one transaction
    assert not result.refused
    wait_for(lambda: dst.owned() == set(moved), 20, what="b2 to take the moved bundles")
    assert src.owned() == set(bundles) - set(moved)
    assert any(n >= len(moved) and absent_too for n, absent_too in calls), calls  # b2's look at b1's nodes
