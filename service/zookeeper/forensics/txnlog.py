"""ZooKeeper's own transaction logs (``<dataDir>/version-2/log.<zxid>``), decoded for an audit.

Every committed write of the cluster is in these files with the session that made it, its zxid and
the server's time, which is what proves after the fact who wrote what. The decoder follows
ZooKeeper's documented on-disk format (``FileTxnLog``: a ``ZKLG`` header, then per entry an Adler-32
checksum, a length, the jute-serialized ``TxnHeader`` and record, and an end-of-record ``B``);
:func:`toolkit_headers` runs the jar's own ``TxnLogToolkit`` on the same file so an audit can check
that both read the same transactions (zxid, session, type) — the decoder is only trusted where
ZooKeeper's tool agrees with it.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from service.zookeeper.server.java import ZooKeeperLaunchError, find_java, find_zookeeper_jars

MAGIC = 0x5A4B4C47  # "ZKLG"

# ZooKeeper's ZooDefs.OpCode values of the transactions that reach the log.
OP_NAMES = {
    -11: "closeSession",
    -10: "createSession",
    -1: "error",
    1: "create",
    2: "delete",
    5: "setData",
    7: "setACL",
    13: "check",
    14: "multi",
    15: "create2",
    16: "reconfig",
    19: "createContainer",
    20: "deleteContainer",
    21: "createTTL",
}
CREATES = {"create", "create2", "createContainer", "createTTL"}


class TxnLogError(ValueError):
    """A transaction log that is not one, or an entry whose checksum does not match."""


@dataclass(frozen=True)
class Op:
    """One change inside a transaction (a multi has several)."""

    kind: str  # create, delete, setData, check, error, ...
    path: str | None = None
    data: bytes | None = None
    ephemeral: bool = False
    version: int | None = None
    error: int | None = None


@dataclass(frozen=True)
class Txn:
    """One logged transaction: who (``session``), when (``time_ms`` on the server), what (``ops``)."""

    zxid: int
    session: int
    cxid: int
    time_ms: int
    kind: str
    ops: tuple[Op, ...] = ()
    closed_paths: tuple[str, ...] = ()  # closeSession: the ephemerals it removed
    source: str = field(default="", compare=False)

    @property
    def failed(self) -> bool:
        """A top-level error or a multi whose ops were refused: nothing in it took effect."""
        return self.kind == "error" or any(op.kind == "error" for op in self.ops)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise TxnLogError(f"record truncated at byte {self.pos} (wanted {n})")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def flag(self) -> bool:
        return self.take(1) != b"\x00"

    def buffer(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def string(self) -> str | None:
        raw = self.buffer()
        return None if raw is None else raw.decode("utf-8", errors="replace")

    def acl(self) -> None:
        for _ in range(max(self.i32(), 0)):
            self.i32()
            self.string()
            self.string()


def _op(kind_code: int, r: _Reader) -> Op:
    kind = OP_NAMES.get(kind_code, f"op{kind_code}")
    if kind in CREATES:
        path, data = r.string(), r.buffer()
        r.acl()
        # createContainer / createTTL carry no ephemeral flag: neither node is a session's.
        ephemeral = r.flag() if kind in ("create", "create2") else False
        return Op(kind, path, data, ephemeral=ephemeral)
    if kind in ("delete", "deleteContainer"):
        return Op(kind, r.string())
    if kind == "setData":
        path, data = r.string(), r.buffer()
        return Op(kind, path, data, version=r.i32())
    if kind == "check":
        path = r.string()
        return Op(kind, path, version=r.i32())
    if kind == "setACL":
        path = r.string()
        r.acl()
        return Op(kind, path, version=r.i32())
    if kind == "error":
        return Op(kind, error=r.i32())
    return Op(kind)


def _decode_txn(body: bytes, source: str) -> Txn:
    r = _Reader(body)
    session, cxid, zxid, time_ms, type_code = r.i64(), r.i32(), r.i64(), r.i64(), r.i32()
    kind = OP_NAMES.get(type_code, f"op{type_code}")
    ops: tuple[Op, ...] = ()
    closed: tuple[str, ...] = ()
    if kind == "multi":
        subs = []
        for _ in range(max(r.i32(), 0)):
            sub_type = r.i32()
            sub = r.buffer() or b""
            subs.append(_op(sub_type, _Reader(sub)))
        ops = tuple(subs)
    elif kind == "closeSession":
        # Since 3.6 the closing transaction lists the ephemerals it deletes; older logs have nothing.
        if r.pos < len(body):
            closed = tuple(s or "" for s in (r.string() for _ in range(max(r.i32(), 0))))
    elif kind not in ("createSession",):
        ops = (_op(type_code, r),)
    return Txn(zxid, session, cxid, time_ms, kind, ops, closed, source)


def read_txn_log(path: Path | str) -> Iterator[Txn]:
    """Every complete entry of one log file in order; a torn tail (a crashed member) ends the file."""
    raw = Path(path).read_bytes()
    if len(raw) < 16:
        return
    magic, _version, _dbid = struct.unpack(">iiq", raw[:16])
    if magic != MAGIC:
        raise TxnLogError(f"{path}: not a ZooKeeper transaction log (magic 0x{magic & 0xFFFFFFFF:08x})")
    pos = 16
    while pos + 12 <= len(raw):
        crc, length = struct.unpack(">qi", raw[pos : pos + 12])
        if length <= 0:
            return  # the zero-filled space ZooKeeper preallocates past the last entry
        end = pos + 12 + length
        if end + 1 > len(raw):
            return
        body = raw[pos + 12 : end]
        if zlib.adler32(body) != crc & 0xFFFFFFFF:
            # ZooKeeper stops reading a log at the first bad checksum too (a write torn by a crash).
            return
        if raw[end : end + 1] != b"B":
            raise TxnLogError(f"{path}: entry at byte {pos} lacks its end-of-record marker")
        yield _decode_txn(body, str(path))
        pos = end + 1


@dataclass(frozen=True)
class History:
    """The committed transactions in zxid order, the proposals that never committed, and problems."""

    txns: list[Txn]
    uncommitted: list[Txn]
    conflicts: list[str]


def _same_effect(a: Txn, b: Txn) -> bool:
    # A refused multi is logged with per-op error codes that differ between the member that prepared
    # it and the others (ZooKeeper 3.9 records the failing check as an error on one, as the check on
    # the rest); refused either way, it changed nothing, so that is no conflict.
    head = (a.zxid, a.session, a.cxid, a.kind, a.failed)
    if head != (b.zxid, b.session, b.cxid, b.kind, b.failed):
        return False
    return a.failed or (a.ops, a.closed_paths) == (b.ops, b.closed_paths)


def merged_history(files: Iterable[Path | str], members: int | None = None) -> History:
    """Every member's logs merged into the ensemble's committed history.

    Members are told apart by their data dir (the directory above ``version-2``). A transaction is
    committed once a quorum has logged it, and logs never lose committed entries, so the committed
    ones are those found in at least a quorum of the members' logs. A member that crashed as leader
    keeps the proposals nobody else acknowledged in its log for ever (a snapshot sync does not
    truncate it): those are returned as ``uncommitted``. Within one ZooKeeper epoch the committed
    entries must be gap-free and every uncommitted one must come after them; anything else, or one
    zxid meaning two transactions, is a conflict.
    """
    seen: dict[int, Txn] = {}
    holders: dict[int, set[str]] = {}
    conflicts: list[str] = []
    member_dirs: set[str] = set()
    for f in files:
        member = str(Path(f).resolve().parent.parent)
        member_dirs.add(member)
        for txn in read_txn_log(f):
            first = seen.setdefault(txn.zxid, txn)
            if not _same_effect(first, txn):
                conflicts.append(f"zxid 0x{txn.zxid:x} differs between {first.source} and {txn.source}")
                continue
            holders.setdefault(txn.zxid, set()).add(member)
    quorum = (members or len(member_dirs)) // 2 + 1
    committed = [seen[z] for z in sorted(seen) if len(holders[z]) >= quorum]
    dropped = [seen[z] for z in sorted(seen) if len(holders[z]) < quorum]
    last: dict[int, int] = {}
    for t in committed:
        epoch, counter = t.zxid >> 32, t.zxid & 0xFFFFFFFF
        if counter != last.get(epoch, 0) + 1:
            conflicts.append(f"committed history has a gap before zxid 0x{t.zxid:x}")
        last[epoch] = counter
    for t in dropped:
        if (t.zxid & 0xFFFFFFFF) <= last.get(t.zxid >> 32, 0):
            conflicts.append(
                f"zxid 0x{t.zxid:x} is logged by fewer than {quorum} members inside committed history"
            )
    return History(committed, dropped, conflicts)


_TOOLKIT_LINE = re.compile(r"session 0x([0-9a-f]+) cxid 0x([0-9a-f]+) zxid 0x([0-9a-f]+) (\w+)")


def toolkit_headers(
    path: Path | str, java: str | None = None, timeout: float = 120.0
) -> list[tuple[int, int, str]]:
    """``(zxid, session, type)`` of every entry as ZooKeeper's own ``TxnLogToolkit`` dumps them."""
    java = java or find_java()
    if java is None:
        raise ZooKeeperLaunchError("no java to run TxnLogToolkit")
    jars = find_zookeeper_jars(all_jars=True)
    wanted = ("zookeeper-", "slf4j-api", "metrics-core", "snappy-java", "commons-cli")
    cp = os.pathsep.join(str(j) for j in jars if j.name.startswith(wanted))
    proc = subprocess.run(
        [java, "-cp", cp, "org.apache.zookeeper.server.persistence.TxnLogToolkit", "--dump", str(path)],
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    out: list[tuple[int, int, str]] = []
    for line in proc.stdout.decode("utf-8", errors="replace").splitlines():
        m = _TOOLKIT_LINE.search(line)
        if m is not None:
            out.append((int(m.group(3), 16), int(m.group(1), 16), m.group(4)))
    if proc.returncode != 0 and not out:
        raise ZooKeeperLaunchError(
            f"TxnLogToolkit failed on {path}: {proc.stderr.decode(errors='replace')[-500:]}"
        )
    return out


def cross_check(path: Path | str, java: str | None = None, *, live: bool = False) -> list[str]:
    """Differences between this decoder and ZooKeeper's TxnLogToolkit on one file (empty: they agree).

    ``live``: the member is still writing the file, so the decoder (run second) may see entries the
    toolkit did not yet; only the toolkit's entries are compared then.
    """
    theirs = toolkit_headers(path, java)
    ours = [(t.zxid, t.session, t.kind) for t in read_txn_log(path)]
    problems = []
    if len(ours) < len(theirs) or (not live and len(ours) != len(theirs)):
        problems.append(f"{path}: decoder read {len(ours)} entries, TxnLogToolkit {len(theirs)}")
    for a, b in zip(ours, theirs, strict=False):
        if a != b:
            problems.append(f"{path}: decoder {a} vs TxnLogToolkit {b}")
            break
    return problems
