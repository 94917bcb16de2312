"""The transaction-log decoder and the audit on hand-made histories: each rule must catch its breach."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from service.zookeeper.forensics.audit import audit
from service.zookeeper.forensics.txnlog import Op, Txn, merged_history, read_txn_log

LEADER, AGENT_A, AGENT_B, ADMIN = 0x10, 0xA, 0xB, 0x1
NS = "public/default"
LOW, HIGH = f"{NS}/0x00000000_0x80000000", f"{NS}/0x80000000_0xffffffff"


class History:
    def __init__(self) -> None:
        self.txns: list[Txn] = []
        self.time = 1_000

    def add(
        self, session: int, *ops: Op, kind: str = "multi", dt: int = 100, closed: tuple[str, ...] = ()
    ) -> None:
        self.time += dt
        zxid = (1 << 32) + len(self.txns) + 1
        self.txns.append(Txn(zxid, session, 0, self.time, kind, tuple(ops), closed))


def create(path: str, doc: object = None, ephemeral: bool = False) -> Op:
    return Op("create", path, json.dumps(doc).encode() if doc is not None else b"", ephemeral=ephemeral)


def layout(boundaries: list[str]) -> object:
    return {"bundles": {"boundaries": boundaries, "numBundles": len(boundaries) - 1}}


def healthy() -> History:
    h = History()
    h.add(ADMIN, create(f"/admin/local-policies/{NS}", layout(["0x00000000", "0x80000000", "0xffffffff"])))
    h.add(AGENT_A, create("/loadbalance/brokers/a:8080", {}, ephemeral=True))
    h.add(AGENT_B, create("/loadbalance/brokers/b:8080", {}, ephemeral=True))
    h.add(LEADER, create("/loadbalance/leader", {"brokerId": "s1"}, ephemeral=True))
    h.add(LEADER, Op("setData", "/loadmgr/leader-epoch", b"s1", version=1))
    h.add(
        LEADER,
        Op("check", "/loadmgr/leader-epoch", version=1),
        create(f"/loadmgr/assignments/{LOW}", {"broker": "a:8080"}),
    )
    h.add(
        LEADER,
        Op("check", "/loadmgr/leader-epoch", version=1),
        create(f"/loadmgr/assignments/{HIGH}", {"broker": "b:8080"}),
    )
    h.add(AGENT_A, create(f"/namespace/{LOW}", {"brokerId": "a:8080"}, ephemeral=True))
    h.add(AGENT_B, create(f"/namespace/{HIGH}", {"brokerId": "b:8080"}, ephemeral=True))
    return h


def test_a_healthy_history_passes() -> None:
    r = audit(healthy().txns)
    assert r.violations == [] and r.double_owners == []
    assert r.leader_writes == 3 and r.ownership_creates == 2 and r.leader_terms == 1


def test_a_write_by_a_session_that_does_not_hold_the_leader_node_is_a_violation() -> None:
    h = healthy()
    h.add(AGENT_A, Op("setData", f"/loadmgr/assignments/{HIGH}", b'{"broker":"a:8080"}', version=1))
    r = audit(h.txns)
    assert len(r.violations) == 1 and "while 0x10 held" in r.violations[0]


def test_after_the_leader_session_closes_its_late_write_is_a_violation_but_a_refused_one_is_not() -> None:
    h = healthy()
    h.add(LEADER, kind="closeSession", closed=("/loadbalance/leader",))
    h.add(LEADER, Op("error", error=-103), Op("error", error=-2))  # refused by the epoch check
    assert audit(h.txns).violations == []
    h.add(LEADER, Op("delete", f"/loadbalance/bundle-data/{LOW}"))
    assert "while nobody held" in audit(h.txns).violations[0]


def test_ownership_taken_against_the_assignment_or_by_another_session_is_a_violation() -> None:
    h = healthy()
    h.add(AGENT_A, Op("delete", f"/namespace/{LOW}"))
    h.add(AGENT_B, create(f"/namespace/{LOW}", {"brokerId": "b:8080"}, ephemeral=True))  # assigned to a
    r = audit(h.txns)
    assert len(r.violations) == 1 and "assignment named 'a:8080'" in r.violations[0]


def test_overlapping_ownership_by_two_brokers_is_a_double_owner() -> None:
    h = healthy()
    # A split to three bundles; the low child is assigned to b while a still holds the parent.
    h.add(
        LEADER,
        Op("check", "/loadmgr/leader-epoch", version=1),
        Op(
            "setData",
            f"/admin/local-policies/{NS}",
            json.dumps(layout(["0x00000000", "0x40000000", "0x80000000", "0xffffffff"])).encode(),
            version=1,
        ),
        create(f"/loadmgr/assignments/{NS}/0x00000000_0x40000000", {"broker": "b:8080"}),
    )
    h.add(AGENT_B, create(f"/namespace/{NS}/0x00000000_0x40000000", {"brokerId": "b:8080"}, ephemeral=True))
    r = audit(h.txns)
    assert r.violations == [] and len(r.double_owners) == 1


def test_unowned_episodes_are_measured_from_release_or_session_end_to_the_next_owner() -> None:
    h = healthy()
    h.add(AGENT_A, kind="closeSession", closed=(f"/namespace/{LOW}", "/loadbalance/brokers/a:8080"), dt=500)
    h.add(LEADER, Op("setData", f"/loadmgr/assignments/{LOW}", b'{"broker":"b:8080"}', version=1), dt=700)
    h.add(AGENT_B, create(f"/namespace/{LOW}", {"brokerId": "b:8080"}, ephemeral=True), dt=300)
    r = audit(h.txns, since_ms=h.txns[8].time_ms)
    assert r.violations == []
    assert r.unowned_episodes_ms == [1000] and r.longest_unowned == (1000, LOW)


def test_chroot_judges_only_its_own_nodes() -> None:
    h = History()
    for t in healthy().txns:
        ops = tuple(
            Op(o.kind, "/t1" + o.path if o.path else None, o.data, o.ephemeral, o.version) for o in t.ops
        )
        h.txns.append(Txn(t.zxid, t.session, t.cxid, t.time_ms, t.kind, ops))
    h.add(AGENT_A, Op("setData", "/other/loadmgr/assignments/x/y/0x00000000_0xffffffff", b"{}", version=1))
    r = audit(h.txns, chroot="/t1")
    assert r.violations == [] and r.leader_writes == 3


def _entry(session: int, zxid: int, type_code: int, record: bytes) -> bytes:
    body = struct.pack(">qiqqi", session, 0, zxid, 1_000, type_code) + record
    return struct.pack(">qi", zlib.adler32(body), len(body)) + body + b"B"


def _string(s: str) -> bytes:
    return struct.pack(">i", len(s)) + s.encode()


def _create_record(path: str, data: bytes, ephemeral: bool) -> bytes:
    acl = struct.pack(">i", 1) + struct.pack(">i", 31) + _string("world") + _string("anyone")
    return (
        _string(path) + struct.pack(">i", len(data)) + data + acl + bytes([ephemeral]) + struct.pack(">i", 1)
    )


def _log(path: Path, *entries: bytes, torn: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack(">iiq", 0x5A4B4C47, 2, 0) + b"".join(entries) + torn + bytes(64))
    return path


def test_decoder_reads_entries_stops_at_a_torn_tail_and_keeps_only_what_a_quorum_logged(
    tmp_path: Path,
) -> None:
    one = _entry(7, (1 << 32) + 1, 1, _create_record("/a", b"x", True))
    two = _entry(7, (1 << 32) + 2, 5, _string("/a") + struct.pack(">i", 1) + b"y" + struct.pack(">i", 1))
    orphan = _entry(7, (1 << 32) + 3, 2, _string("/a"))
    bad = bytearray(orphan)
    bad[20] ^= 0xFF  # checksum no longer matches: a write torn by a crash
    m1 = _log(tmp_path / "m1/version-2/log.100000001", one, two, orphan)
    m2 = _log(tmp_path / "m2/version-2/log.100000001", one, two, torn=bytes(bad))
    m3 = _log(tmp_path / "m3/version-2/log.100000001", one)
    got = list(read_txn_log(m1))
    assert [(t.kind, t.ops[0].path, t.ops[0].ephemeral) for t in got] == [
        ("create", "/a", True),
        ("setData", "/a", False),
        ("delete", "/a", False),
    ]
    assert got[1].ops[0].data == b"y"
    assert len(list(read_txn_log(m2))) == 2
    history = merged_history([m1, m2, m3])
    assert [t.zxid & 0xFFFF for t in history.txns] == [1, 2]
    assert [t.zxid & 0xFFFF for t in history.uncommitted] == [3] and history.conflicts == []


def test_handoff_percentiles_are_nearest_rank_like_every_other_figure() -> None:
    from service.zookeeper.forensics.handoff import Handoffs

    got = Handoffs(gaps_ms=list(range(100, 0, -1)), ready_gaps_ms=[20, 10])
    # Nearest rank: the p99 of 1..100 is 99, not the maximum; the p50 of two is the smaller.
    assert got.percentile(0.99) == 99 and got.percentile(0.5) == 50
    summary = got.summary()
    assert summary["p99Ms"] == 99 and summary["maxMs"] == 100
    assert summary["readyFirstP50Ms"] == 10 and summary["readyFirstP99Ms"] == 20
    assert Handoffs().summary()["p50Ms"] is None
