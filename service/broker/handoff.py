"""``Handoff``: a moved bundle stays served until its next owner is ready to take it over.

A mixin of :class:`service.broker.ownership.OwnershipFollower` (kept apart so ``ownership.py`` stays
under the ~400-line guideline); ``docs/ownership.md``, rule 3, *handoff*.

Both agents of a move learn of it at once (the old owner from its assignment watch, the new one from
its hint), but the new owner is only ready to take over once it has read the assignment, met the old
node and put a watch on it. When the old owner let go first, the bundle stayed unowned until the new
owner's process got there: with 20 agent processes on two cores, a median of 456 ms per move. Now:

* the **new owner**, once its watch on the old owner's node is armed, creates the ephemeral node
  ``/loadmgr/handoff/<bundle>@<assignment version>`` ("ready") and deletes it after the take;
* the **old owner** keeps serving a bundle rewritten to another broker until that node exists (an
  ``exists`` watch tells it), then releases as before; the new owner's watch then fires and it
  creates its node from kazoo's thread. The wait is bounded (``HANDOFF_WAIT_S``): a next owner that
  never says ready (an older agent, one that died) gets the bundle as it did before, by its create
  once the node is gone. The version in the name ties "ready" to one assignment, so a stale node
  from an earlier move of the same bundle never counts.

An old owner lets go of at most ``HANDOFF_IN_FLIGHT`` ready bundles whose take it has not seen (the
next owner deletes its "ready" node in its take's own transaction, and the old owner's watch on that
node tells it); the rest stay served meanwhile.

Never two owners still holds: the ownership node is only ever created once the old one is deleted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from service.broker.requests import AgentRequests
from service.zookeeper import paths as P
from service.zookeeper.session.wire import translated

if TYPE_CHECKING:
    import threading

    from service.zookeeper.metadata.store import ZkStore

log = logging.getLogger(__name__)

# How long an old owner keeps a moved bundle waiting for its next owner to say it is ready. Beyond
# it the bundle is let go as before (the next owner takes it once it gets there): a bound on how
# long a move can take, not a time the move is expected to take (tens of ms when both are alive).
HANDOFF_WAIT_S = 3.0

# Moved bundles an old owner has let go after their next owner said ready, and whose take it has not
# seen yet (the next owner deletes its "ready" node in its take). Letting go of all of a cycle's moves
# at once queued each take behind the others' on two shared cores: 20 agent processes x 100 moves,
# unowned a median of 112 ms per move (p99 722); with 8 in flight 48 (195), 4: 29-44 (153-752),
# 2: 19-28 (109-449), 1: 17 (70), while following the cycle took 7.6, 8.3-9, 10-11.7 and 13.3 s
# (bench/agent_scale.py). The bundles kept waiting are still served where they are.
HANDOFF_IN_FLIGHT = 2


class Handoff(AgentRequests):
    if TYPE_CHECKING:
        _store: ZkStore
        _lock: threading.Lock
        _assigned: dict[str, int]
        owned: frozenset[str]
        _broker: str
        _wake: Callable[[], None]

        def resync(self) -> None: ...

    def _init_handoff(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._leaving: dict[str, int] = {}  # held here, assigned elsewhere -> that assignment's version
        self._awaiting: dict[str, tuple[int, float]] = {}  # bundle -> (version, give-up time)
        self._dirty_handoff: set[str] = set()  # changed under _lock
        self._ready: dict[str, int] = {}  # our "ready" nodes: bundle -> assignment version
        # Under _lock (kazoo's thread changes them): the next owner said ready, in the order seen ->
        # that assignment's version; let go, the take not seen yet -> (that version, give-up time).
        self._ready_seen: dict[str, int] = {}
        self._in_flight: dict[str, tuple[int, float]] = {}
        self._taken_ready: set[str] = set()  # our "ready" nodes deleted by our take's transaction
        self.handoffs_awaited = 0  # released once the next owner said ready
        self.handoffs_timed_out = 0  # released after HANDOFF_WAIT_S without it

    def _forget_handoffs(self) -> None:
        """A new session: its ephemeral "ready" nodes died with the old one."""
        self._leaving.clear()
        self._awaiting.clear()
        self._ready.clear()
        self._ready_seen.clear()
        self._in_flight.clear()
        self._taken_ready.clear()

    def _handoff_resync(self) -> None:
        """Watches may be lost: look at every awaited "ready" node again (caller holds ``_lock``)."""
        # Ready and let-go bundles too (_look_again): a take missed meanwhile must not hold a slot.
        self._dirty_handoff |= set(self._awaiting) | set(self._ready_seen) | set(self._in_flight)

    # ---- kazoo's thread ----------------------------------------------------------------------------
    def _on_handoff(self, event: WatchedEvent) -> None:
        if event.path is None:
            self.resync()
            return
        bundle = P.handoff_bundle(event.path)
        if bundle is not None:
            with self._lock:
                self._dirty_handoff.add(bundle)
                if event.type == EventType.DELETED:  # taken (or the next owner went): a slot is free
                    self._in_flight.pop(bundle, None)
                    self._ready_seen.pop(bundle, None)
            self._wake()

    # ---- the old owner -----------------------------------------------------------------------------
    def _releasable(self, leaving: Iterable[str], dirty: set[str]) -> list[str]:
        """Of the bundles no longer assigned here, those to let go now: each not served any more, or
        not assigned to another broker, or whose next owner said ready, or waited on long enough."""
        now = self._clock()
        out: list[str] = []
        check: list[str] = []
        self._look_again(dirty)
        with self._lock:
            seen = dict(self._ready_seen)
        for bundle in leaving:
            version = self._leaving.get(bundle)
            if bundle not in self.owned or version is None:
                out.append(bundle)
                continue
            if seen.get(bundle) == version:
                continue  # ready, waiting for a slot
            got = self._awaiting.get(bundle)
            if got is None or got[0] != version:
                self._awaiting[bundle] = (version, now + HANDOFF_WAIT_S)
                check.append(bundle)
            elif now >= got[1]:
                self.handoffs_timed_out += 1
                out.append(bundle)
            elif bundle in dirty:
                check.append(bundle)
        for bundle, stat in self._watched(
            check, lambda b: P.handoff_path(b, self._leaving[b]), self._on_handoff, exists=True
        ):
            if isinstance(stat, Exception):
                raise stat
            if stat is not None:
                with self._lock:
                    self._ready_seen[bundle] = self._leaving[bundle]
                # The bound is on the wait for "ready", not for a slot: should it stop counting as
                # ready (a resync, its node gone), the wait starts afresh.
                self._awaiting.pop(bundle, None)
        timed_out = [b for b in out if b in self._awaiting and b not in check]
        out += self._gated(set(leaving), now)
        if timed_out:
            log.info(
                "agent %s: %d moved bundle(s) let go after %.0f s without their next owner ready, e.g. %s",
                self._broker,
                len(timed_out),
                HANDOFF_WAIT_S,
                timed_out[0],
            )
        for bundle in out:
            self._awaiting.pop(bundle, None)
        return sorted(set(out))

    def _look_again(self, dirty: set[str]) -> None:
        """A ready node's watch can be used up by a change the node never had (SetWatches fires at once
        for a node created after the zxid it is given, service/zookeeper/session/bulk.py): look again
        at each ready or let-go bundle whose watch fired, or its take would go unseen and hold a slot."""
        with self._lock:
            again = {b: v for b, v in self._ready_seen.items() if b in dirty}
            again.update({b: v for b, (v, _) in self._in_flight.items() if b in dirty})
        for bundle, stat in self._watched(
            sorted(again), lambda b: P.handoff_path(b, again[b]), self._on_handoff, exists=True
        ):
            if isinstance(stat, Exception):
                raise stat
            if stat is None:  # taken, or its next owner gone
                with self._lock:
                    if self._in_flight.get(bundle, (None, 0.0))[0] == again[bundle]:
                        del self._in_flight[bundle]
                    if self._ready_seen.get(bundle) == again[bundle]:
                        del self._ready_seen[bundle]

    def _gated(self, leaving: set[str], now: float) -> list[str]:
        """The next bundles whose next owner is ready, as slots free up (HANDOFF_IN_FLIGHT)."""
        with self._lock:
            for bundle, (_, until) in list(self._in_flight.items()):
                if now >= until:  # the take was never seen (a lost watch, a failed take): the slot back
                    del self._in_flight[bundle]
            free = HANDOFF_IN_FLIGHT - len(self._in_flight)
            ready = [b for b, v in self._ready_seen.items() if b in leaving and self._leaving.get(b) == v]
            go = ready[: max(0, free)]
            for bundle in go:
                self._in_flight[bundle] = (self._ready_seen.pop(bundle), now + HANDOFF_WAIT_S)
        self.handoffs_awaited += len(go)
        return go

    def _note_assignment(self, bundle: str, broker: str | None, version: int) -> None:
        """Remember where a bundle read here is assigned now, when that is another broker."""
        if broker is not None and broker != self._broker:
            self._leaving[bundle] = version
        else:
            self._leaving.pop(bundle, None)

    def _released(self, bundles: Iterable[str]) -> None:
        with self._lock:
            for bundle in bundles:
                self._ready_seen.pop(bundle, None)
        for bundle in bundles:
            self._leaving.pop(bundle, None)
            self._awaiting.pop(bundle, None)

    # ---- the new owner -----------------------------------------------------------------------------
    def _say_ready(self, bundles: Iterable[str]) -> None:
        """Our watch on the old owner's node of each bundle is armed: tell it we are ready."""
        todo = sorted(b for b in bundles if b in self._assigned and self._ready.get(b) != self._assigned[b])
        if not todo:
            return
        client = self._store.client
        paths = {P.handoff_path(b, self._assigned[b]): b for b in todo}
        again = self._together(list(paths), lambda tx, path: tx.create(path, b"", ephemeral=True))
        for bundle in set(todo) - {paths[p] for p in again}:
            self._ready[bundle] = self._assigned[bundle]
        todo = sorted(paths[p] for p in again)  # a node there already, or no /loadmgr/handoff yet

        def create(b: str) -> Any:
            return client.create_async(P.handoff_path(b, self._assigned[b]), b"", ephemeral=True)

        results = self._pipelined(todo, create)
        if any(isinstance(r, NoNodeError) for _, r in results):
            self.requests += 1
            with translated():
                client.ensure_path(P.HANDOFF)
            missing = [b for b, r in results if isinstance(r, NoNodeError)]
            results = [(b, r) for b, r in results if not isinstance(r, NoNodeError)]
            results += self._pipelined(missing, create)
        for bundle, result in results:
            if isinstance(result, Exception) and not isinstance(result, NodeExistsError):
                raise result
            self._ready[bundle] = self._assigned[bundle]

    def _withdraw_ready(self) -> None:
        """Delete our "ready" nodes of bundles taken since, or no longer assigned here at that version."""
        with self._lock:
            gone, self._taken_ready = self._taken_ready, set()
        for bundle in gone:
            self._ready.pop(bundle, None)
        done = sorted(b for b, v in self._ready.items() if b in self.owned or self._assigned.get(b) != v)
        if not done:
            return
        self._delete_all([P.handoff_path(b, self._ready.pop(b)) for b in done])
