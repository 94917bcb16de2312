"""Watch-fed copies of ZooKeeper subtrees: read once, then only what changed.

A :class:`WatchedTree` holds the decoded value of every leaf node below one root (a broker report,
a bundle's assignment, ...). It reads the whole subtree once, leaving a one-shot ZooKeeper watch on
every directory (children) and every leaf (data); a watch that fires only records the path as dirty
on kazoo's thread. :meth:`WatchedTree.sync`, called by whoever uses the tree, reads exactly the
dirty paths again (pipelined, re-arming their watches), so a refresh of an unchanged cluster reads
nothing at all.

A root that does not exist yet is not created: the tree is empty with an exists watch on the root,
and its creation brings a full read.

Resync (a full re-read) happens on first use, when asked (:meth:`WatchCache.request_resync`: a new
leader term), and after any connection gap: a SUSPENDED or LOST connection, or kazoo resetting its
watchers, may have dropped events, so a partial picture is never trusted.

Writes of the cache's own user are known without reading them back: :meth:`WatchedTree.note_written`
records the value and the version the write produced; when that write's own watch event arrives,
``exists`` re-arms the watch and, if the version is still the one written, the data is not read.

Values are decoded by the caller's functions (the store's parsing), once per change; a node that
does not decode keeps its version with no value, so a compare-and-set writer can still replace it.

Every leaf that changes (read, written by us, or gone) is also appended to the tree's journal, so a
user can ask which leaves changed since it last looked (:meth:`WatchedTree.changes_since`) instead
of comparing all of them; a full read starts a new generation, which tells it to look at all.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kazoo.exceptions import NoNodeError
from kazoo.protocol.serialization import Exists, GetChildren, GetData
from kazoo.protocol.states import EventType, WatchedEvent

from service.zookeeper import paths as P
from service.zookeeper.session import bulk
from service.zookeeper.session.nodes import PIPELINE, JsonZk
from service.zookeeper.session.pipeline import Call, submit_many
from service.zookeeper.session.wire import translated

log = logging.getLogger(__name__)
V = TypeVar("V")
BULK_MIN = 64  # fewer dirty nodes than this are read one request each, with kazoo's own calls
Decode = Callable[[str, bytes, Any], V | None]
# Generations are unique across trees: a cursor from a replaced cache (a new session's) never
# passes for one of the new tree.
_GENERATIONS = itertools.count(1)


def bundle_leaf(rel: str) -> bool:
    """Bundle trees (``tenant/ns/0x…_0x…``): a node is a leaf when its name is a bundle range."""
    return P.is_range(rel.rsplit("/", 1)[-1])


def depth_leaf(depth: int) -> Callable[[str], bool]:
    """Trees whose leaves sit at a fixed depth (brokers: 1, namespace policies: 2)."""
    return lambda rel: rel.count("/") + 1 == depth


@dataclass
class SyncStats:
    """What one :meth:`WatchedTree.sync` did: reads issued and leaves changed."""

    full: bool = False
    children_read: int = 0
    data_read: int = 0
    stats_read: int = 0
    changed: set[str] = field(default_factory=set)


class WatchedTree(Generic[V]):
    """Decoded leaves below ``root``: ``values`` (decoded, by relative path) and ``versions`` (all)."""

    def __init__(
        self,
        zk: JsonZk,
        root: str,
        decode: Decode[V],
        is_leaf: Callable[[str], bool] = bundle_leaf,
        max_depth: int = 4,
    ) -> None:
        self.zk = zk
        self.root = root.rstrip("/") or "/"
        self.decode = decode
        self.is_leaf = is_leaf
        self.max_depth = max_depth  # tenant/cluster/ns/range: never deeper
        self.values: dict[str, V] = {}
        self.versions: dict[str, int] = {}
        self._children: dict[str, set[str]] = {}  # directory -> names under it
        self._own: dict[str, int] = {}  # leaf -> version our own write produced
        self._lock = threading.Lock()
        self._dirty_children: set[str] = set()
        self._dirty_data: set[str] = set()
        self.needs_resync = True
        self.events = 0
        self._journal: list[str] = []  # changed leaves, oldest first
        self._journal_base = 0  # position of _journal[0] since the generation began
        self.generation = 0  # a new one (from _GENERATIONS) at every full read

    def names(self, rel: str = "") -> list[str]:
        """The child names (last path element) under directory ``rel`` as last listed, sorted."""
        return sorted(name.rsplit("/", 1)[-1] for name in self._children.get(rel, ()))

    def mark(self) -> tuple[int, int]:
        """The journal's current position: what :meth:`changes_since` takes."""
        return (self.generation, self._journal_base + len(self._journal))

    def changes_since(
        self, cursor: tuple[int, int] | None, upto: tuple[int, int] | None = None
    ) -> set[str] | None:
        """Leaves changed between ``cursor`` and ``upto`` (now, by default), both from :meth:`mark`.
        None means "look at every leaf": no cursor yet, a full read since, or a cursor so old the
        journal was trimmed past it."""
        end = upto or self.mark()
        if cursor is None or cursor[0] != self.generation or end[0] != self.generation:
            return None
        if cursor[1] < self._journal_base:
            return None
        return set(self._journal[cursor[1] - self._journal_base : end[1] - self._journal_base])

    def _log(self, rels: Iterable[str]) -> None:
        self._journal.extend(rels)
        # Bounded to a few times the tree: a user that lags further rescans everything once.
        limit = max(4 * len(self.versions), 4096)
        if len(self._journal) > limit:
            cut = len(self._journal) // 2
            del self._journal[:cut]
            self._journal_base += cut

    # ---- kazoo's thread: record, never read -----------------------------------------------------
    def _on_event(self, event: WatchedEvent) -> None:
        if event.path is None or event.type == EventType.NONE:
            self.needs_resync = True  # kazoo reset its watchers: events may be lost
            return
        rel = self._rel(event.path)
        if rel is None:
            return
        if rel == "" and event.type in (EventType.CREATED, EventType.DELETED):
            # The root came into being (its exists watch) or went: read it all again, which also
            # leaves the right watch (children once it exists, exists while it does not).
            self.needs_resync = True
            return
        if rel == "" and event.type == EventType.CHANGED:
            return  # the root's own data (its exists watch): not a leaf of the tree
        with self._lock:
            self.events += 1
            if event.type == EventType.CHILD:
                self._dirty_children.add(rel)
            else:
                self._dirty_data.add(rel)

    # ---- the user's thread ------------------------------------------------------------------------
    def sync(self) -> SyncStats:
        """Bring the tree up to date: a full read after a gap, else the dirty paths only."""
        if self.needs_resync:
            return self._full()
        with self._lock:
            dirs, leaves = self._dirty_children, self._dirty_data
            self._dirty_children, self._dirty_data = set(), set()
        st = SyncStats()
        try:
            self._list(sorted(dirs), st, leaves)
            self._read_leaves(leaves, st)
        except Exception:
            self.needs_resync = True  # half-applied: do not trust it, start over next time
            raise
        self._log(st.changed)
        return st

    def note_written(self, rel: str, value: V | None, version: int) -> None:
        """Our own write of leaf ``rel`` left ``version``: taken as read (its event costs an ``exists``).
        A newer version already read (another writer's, landed while ours was noted late) is kept."""
        if self.versions.get(rel, -1) > version:
            return
        self._own[rel] = version
        self.versions[rel] = version
        self._log((rel,))
        if value is None:
            self.values.pop(rel, None)
        else:
            self.values[rel] = value

    def note_deleted(self, rel: str) -> None:
        """Our own delete of leaf ``rel``; a node created there again is then new to the listing."""
        self._drop_leaf(rel)
        self._log((rel,))
        self._children.get(rel.rsplit("/", 1)[0] if "/" in rel else "", set()).discard(rel)

    # ---- reads ------------------------------------------------------------------------------------
    def _full(self) -> SyncStats:
        self.needs_resync = False
        with self._lock:  # events from here on are recorded and read again next time
            self._dirty_children.clear()
            self._dirty_data.clear()
        self.values, self.versions, self._children, self._own = {}, {}, {}, {}
        self.generation = next(_GENERATIONS)
        self._journal, self._journal_base = [], 0
        st = SyncStats(full=True)
        try:
            # The root is never created: a reader must not write (Pulsar mode touches nothing of
            # Pulsar's, and its configuration store is read-only). An absent root is an empty tree
            # whose exists watch says when it appears.
            with translated():
                present = self.zk.client.exists(self.root, watch=self._on_event)
            if present is None:
                st.changed = set()
                return st
            leaves: set[str] = set()
            self._list([""], st, leaves)
            self._read_leaves(leaves, st)
        except Exception:
            self.needs_resync = True
            raise
        st.changed = set(self.versions)
        return st

    def _list(self, dirs: list[str], st: SyncStats, leaves: set[str]) -> None:
        """List ``dirs`` (re-arming their child watches), level by level into new directories."""
        while dirs:
            results = self._pipelined(dirs, Call(GetChildren, self._on_event))
            st.children_read += len(dirs)
            deeper: list[str] = []
            for rel, kids in results:
                if kids is None:
                    self._drop_dir(rel, st)
                    continue
                names = {f"{rel}/{k}" if rel else k for k in kids}
                for gone in self._children.get(rel, set()) - names:
                    if gone in self._children:
                        self._drop_dir(gone, st)
                    elif self._drop_leaf(gone):
                        st.changed.add(gone)
                new = names - self._children.get(rel, set())
                self._children[rel] = names
                for name in new:
                    if self.is_leaf(name):
                        leaves.add(name)
                    elif name.count("/") + 1 < self.max_depth:
                        deeper.append(name)
            dirs = deeper

    def _read_leaves(self, leaves: set[str], st: SyncStats) -> None:
        rels = sorted(rel for rel in leaves if self.is_leaf(rel))
        if not rels:
            return
        if len(rels) >= BULK_MIN and bulk.supported(self.zk.client):
            # Many nodes (a full sync, or the echo of a cycle's own writes): multiRead + SetWatches.
            timeout = max(self.zk.session_timeout_s, 1.0) * 4
            with translated():
                got = bulk.get_with_watches(
                    self.zk.client, [self._abs(r) for r in rels], self._on_event, timeout
                )
            results: Iterable[tuple[str, Any]] = zip(rels, got, strict=True)
            st.data_read += len(rels)
        else:
            own = [rel for rel in rels if rel in self._own]
            if own:
                # Our own writes: one ``exists`` re-arms the watch; the data is read only if someone
                # else wrote the node after us.
                skip = set()
                for rel, stat in self._pipelined(own, Call(Exists, self._on_event)):
                    if stat is not None and int(stat.version) == self._own.get(rel):
                        skip.add(rel)
                        self._own.pop(rel, None)
                st.stats_read += len(own)
                rels = [rel for rel in rels if rel not in skip]
            results = self._pipelined(rels, Call(GetData, self._on_event))
            st.data_read += len(rels)
        for rel, node in results:
            written = self._own.pop(rel, None)
            if node is None:
                if self._drop_leaf(rel):
                    st.changed.add(rel)
                continue
            raw, stat = node
            if written is not None and int(stat.version) == written:
                continue  # our own write, already held: nothing to decode
            self.versions[rel] = int(stat.version)
            value = self.decode(self._abs(rel), raw, stat)
            if value is None:
                self.values.pop(rel, None)
            else:
                self.values[rel] = value
            st.changed.add(rel)

    def _pipelined(self, rels: list[str], call: Call) -> Iterator[tuple[str, Any]]:
        """``call`` for every path, ``PIPELINE`` in flight; a vanished node yields None."""
        timeout = max(self.zk.session_timeout_s, 1.0) * 2
        out: list[tuple[str, Any]] = []
        with translated():
            for start in range(0, len(rels), PIPELINE):
                chunk = rels[start : start + PIPELINE]
                pending = list(zip(chunk, submit_many(self.zk.client, chunk, call, self._abs), strict=True))
                for rel, result in pending:
                    try:
                        out.append((rel, result.get(timeout=timeout)))
                    except NoNodeError:
                        out.append((rel, None))
        return iter(out)

    # ---- bookkeeping ----------------------------------------------------------------------------
    def _drop_leaf(self, rel: str) -> bool:
        self._own.pop(rel, None)
        self.values.pop(rel, None)
        return self.versions.pop(rel, None) is not None

    def _drop_dir(self, rel: str, st: SyncStats) -> None:
        for name in self._children.pop(rel, set()):
            if name in self._children:
                self._drop_dir(name, st)
            elif self._drop_leaf(name):
                st.changed.add(name)
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if rel and parent in self._children:
            self._children[parent].discard(rel)

    def _abs(self, rel: str) -> str:
        return P.join(self.root, rel) if rel else self.root

    def _rel(self, path: str) -> str | None:
        if path == self.root:
            return ""
        prefix = self.root.rstrip("/") + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None


class WatchCache:
    """Several :class:`WatchedTree` on one session, resynced together after a connection gap."""

    def __init__(self, zk: JsonZk) -> None:
        self.zk = zk
        self.trees: dict[str, WatchedTree[Any]] = {}
        self.resyncs = 0
        self.last_sync_s = 0.0
        zk.add_state_listener(self._on_state)

    def tree(
        self,
        name: str,
        root: str,
        decode: Decode[V],
        is_leaf: Callable[[str], bool] = bundle_leaf,
        max_depth: int = 4,
    ) -> WatchedTree[V]:
        """Add (or return the existing) tree ``name``: any subtree can be followed this way."""
        if name not in self.trees:
            self.trees[name] = WatchedTree(self.zk, root, decode, is_leaf, max_depth)
        tree: WatchedTree[V] = self.trees[name]
        return tree

    def _on_state(self, state: str) -> None:
        # A SUSPENDED connection may come back with the same session (watches kept) or a new one
        # (watches gone); events in between may be missing either way: read everything again.
        if state != "CONNECTED":
            self.request_resync()

    def request_resync(self) -> None:
        for tree in self.trees.values():
            tree.needs_resync = True

    def sync(self, names: Iterable[str] | None = None) -> dict[str, SyncStats]:
        """Sync the named trees (all by default); returns what each one read and changed."""
        started = time.monotonic()
        chosen = self.trees if names is None else {n: self.trees[n] for n in names}
        if any(t.needs_resync for t in chosen.values()):
            self.resyncs += 1
        out = {name: tree.sync() for name, tree in chosen.items()}
        self.last_sync_s = time.monotonic() - started
        return out
