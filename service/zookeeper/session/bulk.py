"""Reading many nodes and watching them with few requests: ZooKeeper's multiRead and SetWatches.

kazoo sends one request per read, and its connection thread handles each one with a ``select`` and
a Python loop turn: about 3,500 reads a second here, so a 100,000-bundle first sync (300,000 nodes)
took 90 s. ZooKeeper (3.6+) answers many reads in one request (``multiRead``, opcode 22), but a
read inside it cannot leave a watch. :func:`get_with_watches` therefore reads in ``multiRead``
batches and then leaves the data watches with ``SetWatches`` (opcode 101, what ZooKeeper's own Java
client sends after a reconnect): given the last zxid the caller had seen *before* the reads, the
server sets a watch on every path unchanged since, and fires the watch at once for every path
changed since (or deleted), so a change between the read and the watch is never lost; at worst a
node is read once more.

Both request records follow the jute layouts of ZooKeeper's ``MultiOperationRecord`` /
``MultiResponse`` and ``SetWatches``, and go through kazoo's ordinary request queue, so replies,
errors and session handling stay kazoo's. kazoo keeps the client side of the watch: the callback is
registered in its data-watcher table, exactly where a ``get(path, watch=...)`` would have put it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, NoNodeError
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    ZnodeStat,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import WatchedEvent

READ_BATCH = 1000  # nodes per multiRead: replies of ~0.5 MiB for bundle-data nodes
WATCH_BATCH_BYTES = 512 * 1024  # SetWatches request size, well under the server's jute.maxbuffer
IN_FLIGHT = 8
long_struct = struct.Struct("!q")


class MultiRead:
    """``getData`` of every path in one request; the reply holds ``(data, stat)`` or None per path."""

    type = 22

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytearray:
        b = bytearray()
        for path in self.paths:
            b.extend(MultiHeader(GetData.type, False, -1).serialize())
            b.extend(write_string(path))
            b.append(0)  # no watch: the server ignores it inside multiRead anyway
        b.extend(multiheader_struct.pack(-1, True, -1))
        return b

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[tuple[bytes, Any] | None]:
        out: list[tuple[bytes, Any] | None] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == GetData.type:
                raw, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                out.append((raw or b"", stat))
            elif header.type == -1:
                err = int_struct.unpack_from(data, offset)[0]
                offset += int_struct.size
                if err != NoNodeError.code:
                    raise EXCEPTIONS[err]()
                out.append(None)
            else:
                raise ValueError(f"unexpected multiRead result type {header.type}")
            header, offset = MultiHeader.deserialize(data, offset)
        return out


class SetWatches:
    """Data watches on ``paths``, fired at once for any node changed after ``relative_zxid``."""

    type = 101

    def __init__(self, relative_zxid: int, paths: Sequence[str], absent: Sequence[str] = ()) -> None:
        self.relative_zxid = relative_zxid
        self.paths = paths
        self.absent = absent  # exist watches: fired at once for a node there by now, else on its create

    def serialize(self) -> bytearray:
        b = bytearray(long_struct.pack(self.relative_zxid))
        for paths in (self.paths, self.absent):  # data watches, exist watches
            b.extend(int_struct.pack(len(paths)))
            for path in paths:
                b.extend(write_string(path))
        b.extend(int_struct.pack(0))  # child watches
        return b

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> bool:
        return True


def supported(client: KazooClient) -> bool:
    """kazoo internals this module relies on are there (else callers read node by node)."""
    return all(hasattr(client, a) for a in ("_call", "_data_watchers", "last_zxid", "handler"))


def get_with_watches(
    client: KazooClient,
    paths: Sequence[str],
    watch: Callable[[WatchedEvent], None],
    timeout: float,
    absent_too: bool = False,
) -> list[tuple[bytes, Any] | None]:
    """``(data, stat)`` (None: no such node) of every path, each left with the data watch ``watch``;
    with ``absent_too`` each missing one with an exist watch (``exists(path, watch)``: its create)."""
    if not paths:
        return []
    client.exists("/")  # a round trip, so last_zxid is the server's current one
    since = int(client.last_zxid)
    full = [_prefix_root(client.chroot, p) for p in paths]
    out = _multi_read(client, full, timeout)
    existing = [p for p, got in zip(full, out, strict=True) if got is not None]
    absent = [p for p, got in zip(full, out, strict=True) if got is None] if absent_too else []
    for p in existing + absent:  # where kazoo dispatches the server's events for these paths
        client._data_watchers[p].add(watch)
    pending = []
    for chunk in _chunks(existing):
        result = client.handler.async_result()
        client._call(SetWatches(since, chunk), result)
        pending.append(result)
    for chunk in _chunks(absent):
        result = client.handler.async_result()
        client._call(SetWatches(since, [], chunk), result)
        pending.append(result)
    for result in pending:
        result.get(timeout=timeout)
    return out


def get_many(client: KazooClient, paths: Sequence[str], timeout: float) -> list[tuple[bytes, Any] | None]:
    """``(data, stat)`` (None: no such node) of every path, in ``multiRead`` batches, no watch: a
    thousand nodes a request instead of one (the leader re-reads each move's nodes before writing)."""
    return _multi_read(client, [_prefix_root(client.chroot, p) for p in paths], timeout)


def _multi_read(client: KazooClient, full: Sequence[str], timeout: float) -> list[tuple[bytes, Any] | None]:
    out: list[tuple[bytes, Any] | None] = []
    window: list[Any] = []
    for start in range(0, len(full), READ_BATCH):
        result = client.handler.async_result()
        client._call(MultiRead(full[start : start + READ_BATCH]), result)
        window.append(result)
        if len(window) >= IN_FLIGHT:
            out.extend(window.pop(0).get(timeout=timeout))
    for result in window:
        out.extend(result.get(timeout=timeout))
    return out


def _chunks(paths: list[str]) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    size = 0
    for p in paths:
        if size + len(p) + 8 > WATCH_BATCH_BYTES and chunks[-1]:
            chunks.append([])
            size = 0
        chunks[-1].append(p)
        size += len(p) + 8
    return [c for c in chunks if c]
