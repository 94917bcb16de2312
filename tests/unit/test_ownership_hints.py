"""Pieces of the watch-driven ownership protocol that need no ZooKeeper: hint names, batch riders
and the transaction-log measure of unowned time per move."""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, RolledBackError

from service.zookeeper import paths as P
from service.zookeeper.forensics.handoff import handoffs
from service.zookeeper.forensics.txnlog import Op as LogOp
from service.zookeeper.forensics.txnlog import Txn
from service.zookeeper.session.batch import BatchResult, Op, _chunks, _settle

BUNDLE = "my-tenant/ns.a/0x00000000_0x40000000"


def test_a_hint_names_its_bundle_and_nothing_else_does() -> None:
    prefix = P.hint_prefix("b1.example:8080", BUNDLE)
    assert prefix.startswith(P.hint_dir("b1.example:8080") + "/")
    name = prefix.rsplit("/", 1)[1] + "0000000042"  # what ZooKeeper makes of a sequential create
    assert "/" not in name
    assert P.hint_bundle(name) == BUNDLE
    for bad in ("x", "abc#", "abc#12x", P.hint_prefix("b", "t/ns/0x1_0x2").rsplit("/", 1)[1] + "1"):
        assert P.hint_bundle(bad) is None


def test_a_ready_node_names_its_bundle_and_version_in_one_flat_name() -> None:
    path = P.handoff_path(BUNDLE, 17)
    assert path.startswith(P.HANDOFF + "/") and "/" not in path[len(P.HANDOFF) + 1 :]
    assert path.endswith("@17")
    assert P.handoff_bundle(path) == BUNDLE
    assert P.handoff_path(BUNDLE, 17) != P.handoff_path(BUNDLE, 18)  # ready for one assignment only
    for bad in (P.HANDOFF, P.HANDOFF + "/x", P.HANDOFF + "/x@", P.HANDOFF + "/x@1a", "/namespace/x@1"):
        assert P.handoff_bundle(bad) is None


class _Result:
    def __init__(self, version: int) -> None:
        self.version = version


def _ops() -> list[Op]:
    ops: list[Op] = []
    for i in range(4):
        ops.append(Op.set(f"/loadmgr/assignments/t/ns/{i}", {"broker": "b2"}, 3, key=i))
        ops.append(Op.hint("b2", f"t/ns/0x{i:08x}_0x{i + 1:08x}"))
    return ops


def test_a_write_and_its_rider_never_go_in_different_transactions() -> None:
    chunks = _chunks(_ops(), max_ops=3, max_bytes=1 << 20)
    assert [len(c) for c in chunks] == [2, 2, 2, 2]
    assert all(not c[0].rider and c[1].rider for c in chunks)


def test_a_refused_rider_refuses_its_write_and_riders_are_never_reported() -> None:
    batch = _ops()
    # the fence check, then the ops; the rider of write 1 (index 3 in the batch) fails
    results: list[Any] = [True] + [RolledBackError()] * 3 + [NodeExistsError()] + [RolledBackError()] * 4
    out = BatchResult()
    again = _settle(batch, results, True, out)
    assert [(op.key, why) for op, why in out.refused] == [(1, "NodeExistsError")]
    assert [op.key for op in again if not op.rider] == [0, 2, 3] and len(again) == 6
    ok: list[Any] = [True] + [_Result(4), "/hint"] * 3
    _settle(again, ok, True, out)
    assert [(op.key, v) for op, v in out.done] == [(0, 4), (2, 4), (3, 4)]
    # a failing write is refused with its rider
    out = BatchResult()
    again = _settle(batch, [True, BadVersionError()] + [RolledBackError()] * 7, True, out)
    assert [op.key for op, _ in out.refused] == [0] and len(again) == 6 and not again[0].rider


def _txn(
    zxid: int, session: int, time_ms: int, *ops: LogOp, kind: str = "multi", closed: tuple[str, ...] = ()
) -> Txn:
    return Txn(zxid, session, 0, time_ms, kind, ops, closed)


def test_unowned_time_per_move_counts_releases_not_deaths() -> None:
    node = P.ownership_path(BUNDLE)
    other = P.ownership_path("t/ns/0x40000000_0x80000000")
    history = [
        _txn(1, 0xA, 1_000, LogOp("create", node, b"{}", ephemeral=True)),
        _txn(2, 0xA, 2_000, LogOp("delete", node)),  # a move: A lets go ...
        _txn(3, 0xB, 2_012, LogOp("create", node, b"{}", ephemeral=True)),  # ... B takes it 12 ms later
        _txn(4, 0xB, 3_000, LogOp("delete", node)),
        _txn(5, 0xB, 3_300, LogOp("create", node, b"{}", ephemeral=True)),  # B again: not a move
        _txn(6, 0xC, 3_400, LogOp("create", other, b"{}", ephemeral=True)),
        _txn(7, 0xC, 4_000, kind="closeSession", closed=(other,)),  # C dies: not a move
        _txn(8, 0xA, 4_100, LogOp("create", other, b"{}", ephemeral=True)),
        _txn(9, 0xA, 5_000, LogOp("delete", other)),  # released, never taken
    ]
    got = handoffs(history)
    assert got.gaps_ms == [12] and got.retaken == 1 and got.pending == 1
    assert got.released_ms == [2_000]  # when that move's bundle was let go (benches bin the gaps by it)
    assert got.summary()["p50Ms"] == 12
    assert handoffs(history, since_ms=2_500).gaps_ms == []


def test_a_move_counts_as_ready_first_only_while_the_next_owners_ready_node_exists() -> None:
    node = P.ownership_path(BUNDLE)
    ready = P.handoff_path(BUNDLE, 3)
    history = [
        _txn(1, 0xA, 1_000, LogOp("create", node, b"{}", ephemeral=True)),
        _txn(2, 0xB, 1_500, LogOp("create", ready, b"", ephemeral=True)),  # B: ready
        _txn(3, 0xA, 2_000, LogOp("delete", node)),  # A lets go after it
        _txn(
            4,
            0xB,
            2_004,
            LogOp("check", P.assignment_path(BUNDLE)),
            LogOp("create", node, b"{}", ephemeral=True),
        ),
        _txn(5, 0xB, 2_010, LogOp("delete", ready)),
        _txn(6, 0xB, 3_000, LogOp("delete", node)),  # B lets go with no ready node (the bound ran out)
        _txn(7, 0xC, 3_300, LogOp("create", node, b"{}", ephemeral=True)),
        _txn(8, 0xA, 3_400, LogOp("create", P.handoff_path(BUNDLE, 9), b"", ephemeral=True)),
        _txn(9, 0xA, 3_500, kind="closeSession", closed=(P.handoff_path(BUNDLE, 9),)),  # gone with A
        _txn(10, 0xC, 4_000, LogOp("delete", node)),
        _txn(11, 0xD, 4_050, LogOp("create", node, b"{}", ephemeral=True)),
    ]
    got = handoffs(history)
    assert got.gaps_ms == [4, 300, 50]
    assert got.ready_gaps_ms == [4]
    assert got.summary()["readyFirst"] == 1 and got.summary()["readyFirstP50Ms"] == 4
