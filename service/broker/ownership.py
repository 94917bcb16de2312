"""The agent's side of bundle ownership (``docs/ownership.md``): driven by watches, not polls.

An agent keeps state only for the bundles that concern it, and reads only what changed:

* **Hints.** With every assignment naming a broker the leader creates, in the same fenced
  transaction, a sequential node under ``/loadmgr/broker-assignments/<brokerId>``. One child watch
  on that directory tells the agent it was given something; it then reads the assignment of each
  newly hinted bundle (the assignment node is the truth, the hint only says where to look).
* **Assignments.** Each assignment read leaves a data watch; a rewrite (a move) or a delete (a
  split, an unload without destination, a namespace deletion) fires it, and the owner releases:
  it stops serving the bundle, then deletes its node only if its session holds it.
* **Takeover.** A bundle assigned here whose ownership node another session still holds gets an
  ``exists`` watch on that node; the moment the old owner deletes it the agent creates its own,
  in one transaction with a check of the assignment version it read.
* **Own nodes.** Each node this session holds has an ``exists`` watch: if it vanishes the agent
  stops serving the bundle (and takes it again while it is still assigned here).

A steady agent makes no ZooKeeper request. After a connection gap (kazoo re-arms no watch, see
python-zk/kazoo#151) or on a new session, :meth:`OwnershipFollower.resync` re-reads the agent's
own hints, assignments and nodes: O(own bundles). The agent removes hints of bundles no longer
assigned to it, and older duplicates, so its directory stays the size of what it owns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from service.broker.handoff import Handoff
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.wire import json_bytes, translated

log = logging.getLogger(__name__)


def _with(bundles: set[str]) -> Callable[[frozenset[str]], frozenset[str]]:
    return lambda owned: owned | bundles


def _without(bundles: set[str]) -> Callable[[frozenset[str]], frozenset[str]]:
    return lambda owned: owned - bundles


def _bundle_of(path: str, root: str) -> str | None:
    return path[len(root) + 1 :] if path.startswith(root + "/") else None


class OwnershipFollower(Handoff):
    """What one agent owns, kept in step with its assignments through watches."""

    def __init__(self, store: ZkStore, broker_id: str, owner_doc: dict[str, Any], wake: Callable[[], None]):
        self._store = store
        self._broker = broker_id
        self._doc = json_bytes(owner_doc)
        self._wake = wake
        self._lock = threading.Lock()
        self._session: int | None = None
        self._list_hints = True
        self._resync = True
        self._dirty_assign: set[str] = set()
        self._dirty_owner: set[str] = set()
        self._hints: dict[str, list[str]] = {}  # bundle -> its hint nodes' names, oldest first
        self._assigned: dict[str, int] = {}  # bundle assigned here -> assignment version read
        # No longer served, but this session may still hold the node (a connection lost mid-release,
        # or serving stopped while cut off): looked at again until its delete is confirmed or it is
        # assigned here again, or the next owner would wait forever. Changed under ``_lock``.
        self._unreleased: set[str] = set()
        self.owned: frozenset[str] = frozenset()  # replaced, never mutated: read from other threads
        self._owned_lock = threading.Lock()  # the agent's thread and kazoo's (a fast take) change it
        self.fast_takes = 0
        self.requests = 0  # ZooKeeper requests sent (benches read it)
        self.steps = 0
        self._init_handoff()

    # ---- kazoo's thread: flag and wake only ------------------------------------------------------
    def _on_hints(self, event: WatchedEvent) -> None:
        if event.path is None:  # kazoo dropped every watch on a connection loss: look again
            self.resync()
            return
        with self._lock:
            self._list_hints = True
        self._wake()

    def _on_assignment(self, event: WatchedEvent) -> None:
        if event.path is None:
            self.resync()
            return
        bundle = _bundle_of(event.path, P.ASSIGNMENTS)
        if bundle is not None:
            with self._lock:
                self._dirty_assign.add(bundle)
            self._wake()

    def _on_owner(self, event: WatchedEvent) -> None:
        if event.path is None:
            self.resync()
            return
        bundle = _bundle_of(event.path, P.OWNERSHIP)
        if bundle is None:
            return
        with self._lock:
            self._dirty_owner.add(bundle)
            version = self._assigned.get(bundle) if event.type == EventType.DELETED else None
        if version is not None and bundle not in self.owned:
            self._fast_take(bundle, version)
        self._wake()

    def _fast_take(self, bundle: str, version: int) -> None:
        """The previous owner just deleted the node of a bundle assigned here: create ours now, from
        kazoo's thread without blocking it (the request is only queued), checked against the
        assignment version read. The agent's next step confirms it and arms the node's watch."""
        tx = self._store.client.transaction()
        tx.check(P.assignment_path(bundle), version)
        tx.create(P.ownership_path(bundle), self._doc, ephemeral=True)
        # Our "ready" node goes in the same transaction: the old owner's watch on it learns of the take
        # at once (it lets go of its next moved bundle then, service/broker/handoff.py).
        ready = self._ready.get(bundle) == version
        if ready:
            tx.delete(P.handoff_path(bundle, version))
        self.requests += 1

        def done(result: Any) -> None:
            try:
                ok = not any(isinstance(r, Exception) for r in result.get_nowait())
            except Exception:
                ok = False
            if ok:
                self.fast_takes += 1
                self._serve(lambda owned: owned | {bundle})
            with self._lock:
                self._dirty_owner.add(bundle)
                if ok and ready:
                    self._taken_ready.add(bundle)
            self._wake()

        tx.commit_async().rawlink(done)

    def _serve(self, change: Callable[[frozenset[str]], frozenset[str]]) -> None:
        with self._owned_lock:
            self.owned = change(self.owned)

    def resync(self) -> None:
        """Re-read everything that concerns this agent at the next step (watches may be lost)."""
        with self._lock:
            self._resync = True
        self._wake()

    def stop_serving(self) -> None:
        """Cut off from ZooKeeper: serve nothing until the next step has checked each node again.

        The session may outlive the cut: every node it held is then still there, and a bundle moved
        away meanwhile must still be released (the step re-takes what is still assigned here)."""
        with self._lock:  # then _owned_lock inside _serve: the order step() takes them in
            self._unreleased |= self.owned
            self._serve(lambda _: frozenset())
        self.resync()

    # ---- the agent's thread ----------------------------------------------------------------------
    def step(self) -> bool:
        """Act on what changed since the last step; True when the served set changed."""
        before = self.owned
        session = self._store.session_id
        with self._lock:
            if session != self._session:  # a new session: its ephemeral nodes died with the old one
                self._session = session
                self._serve(lambda _: frozenset())
                self._assigned.clear()
                self._unreleased.clear()
                self._forget_handoffs()
                self._resync = True
            if self._resync:
                self._list_hints = True
                known = set(self._hints) | set(self.owned) | self._unreleased
                self._dirty_assign |= known
                self._dirty_owner |= known
                self._handoff_resync()
                self._resync = False
            list_hints, self._list_hints = self._list_hints, False
            dirty_assign, self._dirty_assign = self._dirty_assign, set()
            dirty_owner, self._dirty_owner = self._dirty_owner, set()
            dirty_handoff, self._dirty_handoff = self._dirty_handoff, set()
        try:
            self.steps += 1
            if list_hints:
                fresh = self._read_hints()
                dirty_assign |= fresh
                dirty_owner |= fresh
            self._read_assignments(dirty_assign)
            # Takes first: a bundle coming here waits on its previous owner's node (or gets it) before
            # this agent spends time on its own releases; the releases' bundles are another set.
            held_before = dirty_owner & self.owned
            self._take(sorted(b for b in dirty_owner if b in self._assigned and b not in self.owned))
            with self._lock:  # assigned here again: its node is ours to keep (the take re-serves it)
                self._unreleased -= set(self._assigned)
                unreleased = set(self._unreleased)
            # A bundle moved away stays served until its next owner is ready (service/broker/handoff.py)
            leaving = sorted((self.owned | unreleased) - set(self._assigned))
            self._release(self._releasable(leaving, dirty_handoff))
            self._check_own_nodes(held_before & self.owned)
            self._withdraw_ready()
            self._tidy_hints(dirty_assign)  # last: nobody waits for it
        except Exception:
            self.resync()  # whatever was half done is looked at again, from ZooKeeper
            raise
        return self.owned != before

    def _read_hints(self) -> set[str]:
        """List this broker's hint directory (re-arming its watch); returns bundles hinted anew."""
        path = P.hint_dir(self._broker)
        with translated():
            try:
                self.requests += 1
                names = self._store.client.get_children(path, watch=self._on_hints)
            except NoNodeError:
                self.requests += 2
                self._store.client.ensure_path(path)
                names = self._store.client.get_children(path, watch=self._on_hints)
        hints: dict[str, list[str]] = {}
        for name in sorted(names, key=lambda n: n.rpartition(P.HINT_SEP)[2]):
            bundle = P.hint_bundle(name)
            if bundle is not None:
                hints.setdefault(bundle, []).append(name)
        fresh = {b for b, got in hints.items() if got != self._hints.get(b)}
        self._hints = hints
        return fresh

    def _read_assignments(self, bundles: Iterable[str]) -> None:
        todo = sorted(b for b in bundles if b in self._hints or b in self.owned or b in self._assigned)
        for bundle, result in self._watched(todo, P.assignment_path, self._on_assignment):
            got = None
            if result is not None and not isinstance(result, NoNodeError):
                if isinstance(result, Exception):
                    raise result
                raw, stat = result
                got = self._store.decode_assignment(P.assignment_path(bundle), raw, stat)
            if got is None:
                self._note_assignment(bundle, None, -1)
            else:
                self._note_assignment(bundle, got.value.broker, int(got.version))
            if got is not None and got.value.broker == self._broker:
                self._assigned[bundle] = int(got.version)
            else:
                self._assigned.pop(bundle, None)

    def _release(self, bundles: list[str]) -> None:
        """Stop serving first, then delete each node this session holds (read first: only a node
        whose ``ephemeralOwner`` is this session, at the version read): never two owners."""
        if not bundles:
            return
        self._serve(lambda owned: owned - set(bundles))
        with self._lock:
            self._unreleased |= set(bundles)
        client = self._store.client
        stats = self._pipelined(bundles, lambda b: client.exists_async(P.ownership_path(b)))
        session = self._store.session_id
        version = {
            b: int(s.version)
            for b, s in stats
            if s is not None and not isinstance(s, Exception) and s.ephemeralOwner == session
        }
        with self._lock:  # gone already, or not this session's
            self._unreleased -= set(bundles) - set(version)
        released = 0
        for bundle, result in self._pipelined(
            sorted(version), lambda b: client.delete_async(P.ownership_path(b), version=version[b])
        ):
            if not isinstance(result, BadVersionError):  # deleted, or gone (NoNode): done with it
                with self._lock:
                    self._unreleased.discard(bundle)
            released += 0 if isinstance(result, Exception) else 1
        self._released(bundles)
        log.info("agent %s released %d bundle(s), e.g. %s", self._broker, released, bundles[0])

    def _tidy_hints(self, looked_at: set[str]) -> None:
        """Delete the hints of bundles no longer assigned here, and all but the newest of the rest."""
        stale: list[str] = []
        for bundle in sorted(looked_at & set(self._hints)):
            names = self._hints[bundle]
            if bundle in self._assigned:
                stale += names[:-1]
                self._hints[bundle] = names[-1:]
            else:
                stale += names
                del self._hints[bundle]
        base = P.hint_dir(self._broker)
        self._delete_all([f"{base}/{n}" for n in stale])

    def _check_own_nodes(self, bundles: set[str]) -> None:
        """Re-arm the watch on each node this session holds; one that is gone is no longer served."""
        watched = sorted(bundles)
        lost: set[str] = set()
        for bundle, stat in self._watched(watched, P.ownership_path, self._on_owner, exists=True):
            if isinstance(stat, Exception):
                raise stat
            if stat is None or stat.ephemeralOwner != self._store.session_id:
                lost.add(bundle)
        if lost:
            log.warning("agent %s lost the ownership node of %d bundle(s)", self._broker, len(lost))
            self._serve(lambda owned: owned - lost)
            with self._lock:
                self._dirty_owner |= lost & set(self._assigned)  # take it again while assigned here
            self._wake()

    def _take(self, bundles: list[str]) -> None:
        """Create the ownership node of each bundle assigned here, checked against the assignment.

        It looks first: in a move the previous owner still holds the node, and the ``exists`` watch
        the look leaves is the one the takeover needs, so a moved bundle costs one request here (a
        create that met ``NodeExists`` and then the watch cost two, in the busiest moment of a cycle).
        """
        session = self._store.session_id
        free: list[str] = []
        waiting: set[str] = set()
        for bundle, stat in self._watched(bundles, P.ownership_path, self._on_owner, exists=True):
            if isinstance(stat, Exception):
                raise stat
            if stat is None:
                free.append(bundle)
            elif stat.ephemeralOwner == session:
                if bundle not in self.owned:
                    self._serve(_with({bundle}))  # held by this very session (a resync)
            else:
                waiting.add(bundle)  # the previous owner has not let go: our watch is on its node
        self._say_ready(waiting)  # service/broker/handoff.py
        self._create_owned(free)

    def _create_owned(self, bundles: list[str]) -> None:
        client = self._store.client

        def create(b: str) -> Any:
            tx = client.transaction()
            tx.check(P.assignment_path(b), self._assigned[b])
            tx.create(P.ownership_path(b), self._doc, ephemeral=True)
            return tx.commit_async()

        self._ensure_parents(bundles)
        taken: set[str] = set()
        held: list[str] = []
        for bundle, result in self._pipelined(bundles, create):
            if isinstance(result, Exception):
                raise result
            if not any(isinstance(r, Exception) for r in result):
                taken.add(bundle)
            elif isinstance(result[1], NodeExistsError):
                held.append(bundle)  # taken by another session since our look: watch its node
            else:
                with self._lock:  # the assignment changed since it was read: read it again
                    self._dirty_assign.add(bundle)
                    self._dirty_owner.add(bundle)
        if taken:
            log.info("agent %s took %d bundle(s), e.g. %s", self._broker, len(taken), min(taken))
            self._serve(lambda owned: owned | taken)
        # A node we just created fires the watch our look left on it (created), and the next step
        # re-arms it there (_check_own_nodes). Watch each node another session created meanwhile.
        retry: set[str] = set()
        waiting: set[str] = set()
        for bundle, stat in self._pipelined(held, self._watch_owner):
            if isinstance(stat, Exception):
                raise stat
            if stat is None:
                retry.add(bundle)  # let go between its create and our look: try again now
            elif stat.ephemeralOwner == self._store.session_id:
                self._serve(_with({bundle}))  # cannot be, but it is ours then
            else:
                waiting.add(bundle)
        self._say_ready(waiting)
        if retry:
            with self._lock:
                self._dirty_owner |= retry
            self._wake()

    def _watch_owner(self, bundle: str) -> Any:
        return self._store.client.exists_async(P.ownership_path(bundle), watch=self._on_owner)
