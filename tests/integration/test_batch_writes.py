"""Fenced batched writes (service.zookeeper.session.batch) on a real ZooKeeper: packing, conflicts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.batch import Op, commit_batches


@pytest.fixture
def store(zk_chroot_hosts: str) -> Iterator[ZkStore]:
    s = ZkStore(zk_chroot_hosts, session_timeout_s=10)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def _paths(n: int) -> list[str]:
    return [f"/loadmgr/assignments/t/ns{i % 7}/0x{i:08x}_0x{i + 1:08x}" for i in range(n)]


def test_thousands_of_writes_go_out_in_few_fenced_transactions(store: ZkStore) -> None:
    fence = store.bump_epoch("leader")
    paths = _paths(2500)
    result = commit_batches(
        store, [Op.create(p, {"i": i}, key=i) for i, p in enumerate(paths)], fence, 100, 1 << 20, 4
    )
    assert len(result.done) == 2500 and not result.refused and not result.fenced_out
    assert result.transactions == 25 and result.rounds == 1
    assert store.get_json(paths[1234]).value == {"i": 1234}  # type: ignore[union-attr]
    assert {v for _, v in result.done} == {0}  # a create leaves version 0

    # Overwrites report the version they left, so the writer never needs to read them back.
    again = commit_batches(store, [Op.set(p, {"i": -1}, 0, key=p) for p in paths[:300]], fence)
    assert {v for _, v in again.done} == {1} and again.transactions == 1


def test_a_lost_race_refuses_only_its_own_write(store: ZkStore) -> None:
    fence = store.bump_epoch("leader")
    paths = _paths(300)
    commit_batches(store, [Op.create(p, {}) for p in paths], fence)
    store.put_json(paths[150], {"other": "writer"})  # version 0 -> 1 behind the leader's back
    result = commit_batches(store, [Op.set(p, {"leader": True}, 0, key=p) for p in paths], fence, 1000)
    assert [(op.key, why) for op, why in result.refused] == [(paths[150], "BadVersionError")]
    assert len(result.done) == 299 and result.rounds == 2  # the rest of its batch went out again
    assert store.get_json(paths[150]).value == {"other": "writer"}  # type: ignore[union-attr]
    assert store.get_json(paths[151]).value == {"leader": True}  # type: ignore[union-attr]


def test_a_replaced_leader_writes_nothing(store: ZkStore) -> None:
    fence = store.bump_epoch("old-leader")
    store.bump_epoch("new-leader")
    paths = _paths(500)
    result = commit_batches(store, [Op.create(p, {}) for p in paths], fence, 100, 1 << 20, 3)
    assert result.fenced_out and not result.done and len(result.refused) == 500
    assert all(store.get_json(p) is None for p in paths[::50])


def test_batches_stay_under_the_byte_limit(store: ZkStore) -> None:
    fence = store.bump_epoch("leader")
    big = "x" * 100_000
    paths = _paths(10)
    result = commit_batches(store, [Op.create(p, {"pad": big}) for p in paths], fence, 1000, 256 * 1024)
    assert len(result.done) == 10 and result.transactions == 5  # two 100 KB writes per transaction
    with pytest.raises(ValueError, match="max_ops"):
        commit_batches(store, [], fence, max_ops=0)


def test_missing_parents_are_created_pipelined_not_one_round_trip_each(
    store: ZkStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cycle's hints go to every destination broker's directory. On a cluster written by Pulsar
    (or by other tools) none exists yet: with one synchronous ensure_path each, 500 brokers cost
    seconds of the write at 100k bundles (issue 49, item 13). Now: pipelined, level by level."""
    fence = store.bump_epoch("leader")
    synchronous: list[str] = []
    real = store.client.ensure_path
    monkeypatch.setattr(store.client, "ensure_path", lambda p, *a, **k: synchronous.append(p) or real(p))
    brokers = [f"10.20.{i // 250}.{i % 250}:8080" for i in range(300)]
    ops: list[Op] = []
    for i, broker in enumerate(brokers):
        bundle = f"t/deep{i % 3}/x/0x{i:08x}_0x{i + 1:08x}"
        ops += [Op.create(f"/loadmgr/assignments/{bundle}", {"broker": broker}, key=bundle)]
        ops += [Op.hint(broker, bundle)]
    result = commit_batches(store, ops, fence)
    assert len(result.done) == 300 and not result.refused
    assert synchronous == []
    for broker in brokers[::37]:
        assert len(store.client.get_children(P.hint_dir(broker))) == 1
    # Parents that exist by now are left alone; a second plan creates only what it needs.
    again = commit_batches(store, [Op.hint(b, "t/deep0/x/0x0_0x1") for b in brokers[:5]], fence)
    assert again.transactions == 1 and synchronous == []
    assert all(len(store.client.get_children(P.hint_dir(b))) == 2 for b in brokers[:5])


def test_a_parent_created_by_another_writer_meanwhile_costs_nothing(
    store: ZkStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The level's transaction fails whole when one of its parents appeared since it was read (another
    writer): that level then goes one create at a time, and every write still lands."""
    fence = store.bump_epoch("leader")
    brokers = [f"10.30.0.{i}:8080" for i in range(20)]
    store.client.ensure_path(P.hint_dir(brokers[7]))
    real = store.get_many
    monkeypatch.setattr(
        store, "get_many", lambda paths: {p: g for p, g in real(paths).items() if "10.30" not in p}
    )
    ops = [Op.hint(b, "t/ns/0x0_0x1") for b in brokers]
    result = commit_batches(store, ops, fence)
    assert not result.refused and not result.fenced_out
    assert all(len(store.client.get_children(P.hint_dir(b))) == 1 for b in brokers)
