"""Fenced multi-op writes in batches, several in flight: thousands of leader writes in seconds.

One fenced transaction per write costs a full round trip plus a disk sync (~4.5 ms here), so an
18,000-move cycle would spend over a minute writing. :func:`commit_batches` packs the writes into
transactions of at most ``max_ops`` operations and ``max_bytes`` of payload (well under ZooKeeper's
``jute.maxbuffer``, 1 MiB by default, which bounds a whole request), each beginning with the
leader-epoch check, and keeps ``in_flight`` of them outstanding at once.

A transaction is all or nothing, so one stale write (a compare-and-set that lost a race) would
refuse its whole batch: ZooKeeper names the failing operation, which alone is refused, and the
other operations of that batch go out again in the next round. A failed epoch check means this
writer is no longer the leader: that batch and every later one are refused, nothing is retried.

A *rider* (``Op.rider``) belongs to the write before it: it goes in the same transaction, succeeds or
is refused with it, and is not reported on its own. The leader's assignment hints
(:meth:`Op.hint`, ``docs/ownership.md``) ride on the assignment writes they announce.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import NodeExistsError, RolledBackError

from service.zookeeper import paths as P
from service.zookeeper.session.nodes import JsonZk
from service.zookeeper.session.wire import Versioned, json_bytes, translated

log = logging.getLogger(__name__)

BATCH_OPS = 1000
BATCH_BYTES = 256 * 1024  # a quarter of the default jute.maxbuffer: headroom for paths and framing
# Transactions in flight. ZooKeeper applies writes one after another, so an operator's write that
# arrives while a cycle's 30,000 moves are being written waits behind every transaction already sent:
# with 8 in flight (of up to 1,000 ops each, ~125 ms apiece on this machine) an unload to a named
# broker took 1-1.9 s during such a write at 100k bundles. Two keep the server busy all the same:
# each transaction takes far longer than the round trip.
IN_FLIGHT = 2
OP_OVERHEAD = 64  # bytes of framing per operation besides path and data


@dataclass(frozen=True)
class Op:
    """One write: ``kind`` is create, set, delete or check; ``key`` is the caller's handle (a bundle)."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    key: Any = None
    ephemeral: bool = False
    sequence: bool = False
    rider: bool = False  # part of the write before it: same transaction, same fate, not reported

    @staticmethod
    def create(path: str, obj: Any, key: Any = None, ephemeral: bool = False) -> Op:
        return Op("create", path, json_bytes(obj), -1, key, ephemeral)

    @staticmethod
    def set(path: str, obj: Any, version: int = -1, key: Any = None) -> Op:
        return Op("set", path, json_bytes(obj), version, key)

    @staticmethod
    def delete(path: str, version: int = -1, key: Any = None) -> Op:
        return Op("delete", path, b"", version, key)

    @staticmethod
    def hint(broker_id: str, bundle: str) -> Op:
        """The rider announcing to ``broker_id``'s agent that ``bundle``'s assignment now names it."""
        return Op("create", P.hint_prefix(broker_id, bundle), b"", -1, bundle, sequence=True, rider=True)

    @property
    def size(self) -> int:
        return len(self.path) + len(self.data) + OP_OVERHEAD


@dataclass
class BatchResult:
    """``done`` ops with the version each left (create: 0, delete: -1); ``refused`` with the reason."""

    done: list[tuple[Op, int]] = field(default_factory=list)
    refused: list[tuple[Op, str]] = field(default_factory=list)
    fenced_out: bool = False
    transactions: int = 0
    rounds: int = 0


def commit_batches(
    zk: JsonZk,
    ops: Sequence[Op],
    fence: Versioned[str] | None,
    max_ops: int = BATCH_OPS,
    max_bytes: int = BATCH_BYTES,
    in_flight: int = IN_FLIGHT,
) -> BatchResult:
    """Commit ``ops`` in fenced transactions, pipelined; see the module docstring for failures."""
    if max_ops < 1 or max_bytes < 1 or in_flight < 1:
        raise ValueError(f"batch limits must be positive: {max_ops=}, {max_bytes=}, {in_flight=}")
    out = BatchResult()
    _ensure_parents(zk, [op.path for op in ops if op.kind == "create"])
    pending = list(ops)
    while pending and not out.fenced_out:
        out.rounds += 1
        pending = _round(zk, pending, fence, max_ops, max_bytes, in_flight, out)
    for op in pending:
        if not op.rider:
            out.refused.append((op, "fenced"))
    if out.fenced_out and fence is not None:
        zk.report_fenced_out(f"leader epoch {fence.version} superseded (a batch's epoch check was refused)")
    return out


def _units(ops: list[Op]) -> list[list[Op]]:
    """Each write with its riders."""
    units: list[list[Op]] = []
    for op in ops:
        if op.rider and units:
            units[-1].append(op)
        else:
            units.append([op])
    return units


def _chunks(ops: list[Op], max_ops: int, max_bytes: int) -> list[list[Op]]:
    """Transactions of at most ``max_ops`` ops and ``max_bytes``; a write and its riders stay together."""
    chunks: list[list[Op]] = []
    cur: list[Op] = []
    size = 0
    for unit in _units(ops):
        unit_size = sum(op.size for op in unit)
        if cur and (len(cur) + len(unit) > max_ops or size + unit_size > max_bytes):
            chunks.append(cur)
            cur, size = [], 0
        cur.extend(unit)
        size += unit_size
    if cur:
        chunks.append(cur)
    return chunks


def _round(
    zk: JsonZk,
    ops: list[Op],
    fence: Versioned[str] | None,
    max_ops: int,
    max_bytes: int,
    in_flight: int,
    out: BatchResult,
) -> list[Op]:
    """One pass over ``ops``; returns the ops to send again (their batch failed on another op)."""
    retry: list[Op] = []
    window: deque[tuple[list[Op], Any]] = deque()
    timeout = max(zk.session_timeout_s, 1.0) * 4
    with translated():
        for chunk in _chunks(ops, max_ops, max_bytes):
            if out.fenced_out:
                out.refused.extend((op, "fenced") for op in chunk if not op.rider)
                continue
            window.append((chunk, _submit(zk, chunk, fence)))
            out.transactions += 1
            if len(window) >= in_flight:
                batch, result = window.popleft()
                retry.extend(_settle(batch, result.get(timeout=timeout), fence is not None, out))
        while window:
            batch, result = window.popleft()
            retry.extend(_settle(batch, result.get(timeout=timeout), fence is not None, out))
    return retry


def _submit(zk: JsonZk, chunk: list[Op], fence: Versioned[str] | None) -> Any:
    tx = zk.client.transaction()
    if fence is not None:
        tx.check(P.LEADER_EPOCH, fence.version)
    for op in chunk:
        if op.kind == "create":
            tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
        elif op.kind == "set":
            tx.set_data(op.path, op.data, op.version)
        elif op.kind == "delete":
            tx.delete(op.path, op.version)
        else:
            tx.check(op.path, op.version)
    return tx.commit_async()


def _settle(batch: list[Op], results: list[Any], fenced: bool, out: BatchResult) -> list[Op]:
    skip = 1 if fenced else 0
    failed = [
        i for i, r in enumerate(results) if isinstance(r, Exception) and not isinstance(r, RolledBackError)
    ]
    if not failed:
        for op, r in zip(batch, results[skip:], strict=True):
            if op.rider:
                continue
            version = int(r.version) if op.kind == "set" else (0 if op.kind == "create" else -1)
            out.done.append((op, version))
        return []
    if fenced and failed[0] == 0:
        out.fenced_out = True  # commit_batches tells the store once, after the round
        out.refused.extend((op, "fenced") for op in batch if not op.rider)
        return []
    bad = failed[0] - skip
    start = bad
    while start > 0 and batch[start].rider:
        start -= 1
    end = start + 1
    while end < len(batch) and batch[end].rider:
        end += 1
    out.refused.append((batch[start], type(results[failed[0]]).__name__))
    return batch[:start] + batch[end:]


def _ensure_parents(zk: JsonZk, paths: list[str]) -> None:
    """Create the missing parents of nodes about to be created: read in multiRead batches, then the
    missing ones level by level, each level in transactions of up to ``BATCH_OPS``. A cycle's hints
    go to every destination broker's directory; on a cluster whose brokers never had one (Pulsar's
    own, or written by other tools) that is hundreds of new directories, and one synchronous
    ``ensure_path`` each (a round trip per level of each) cost seconds of the cycle's write."""
    parents = sorted({P.parent(p) for p in paths})
    if not parents:
        return
    timeout = max(zk.session_timeout_s, 1.0) * 2
    missing: set[str] = set()
    with translated():
        # The missing parents, then their missing ancestors, one round of reads a level
        # (an existing node is never created: without CREATE on its parent that would be NoAuth).
        checked: set[str] = set()
        todo = parents
        while todo:
            checked.update(todo)
            present = zk.get_many(todo)  # multiRead: a thousand a request (``exists`` is one each)
            absent = [p for p in todo if p not in present]
            missing.update(absent)
            todo = sorted({q for p in absent if (q := P.parent(p)) not in ("/", "") and q not in checked})
        by_depth: dict[int, list[str]] = {}
        for p in missing:
            by_depth.setdefault(p.count("/"), []).append(p)
        for depth in sorted(by_depth):
            level = sorted(by_depth[depth])
            # One transaction per level and thousand (one log write, where single creates cost a
            # sync each); if another writer created one meanwhile, that chunk goes one by one.
            for start in range(0, len(level), BATCH_OPS):
                chunk = level[start : start + BATCH_OPS]
                tx = zk.client.transaction()
                for p in chunk:
                    tx.create(p, b"")
                results = tx.commit_async().get(timeout=timeout)
                if not any(isinstance(r, Exception) for r in results):
                    continue
                created = [zk.client.create_async(p, b"") for p in chunk]
                for result in created:
                    with contextlib.suppress(NodeExistsError):
                        result.get(timeout=timeout)
