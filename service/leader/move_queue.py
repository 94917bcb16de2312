"""``MoveQueue``: every move the leader makes, queued, released at the pace of the disruption budget
(:mod:`balancer.pacing`) and followed until it is served at its destination (issue 46).

One entry point, :meth:`MoveQueue.submit` ``(moves, kind)``, for every kind of move: ``shedding`` (a
cycle's plan: it replaces the shedding moves still queued, since the new plan was decided on newer
data), ``drain`` and ``manual`` (added; a later submission of the same bundle replaces the queued one).
The leader's move tick (:mod:`service.leader.move_tick`) releases what :func:`balancer.pacing.pace`
allows and watches each released move until the bundle's owner is its destination.

The queue is state of one leader term: on losing leadership (or a fenced write refused) it is
dropped whole, and a new term starts with an empty one. Thread-safe: the REST layer reads it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import InvalidInput
from balancer.explain import Explanation
from balancer.pacing import KINDS, BrokerHistory, MoveInFlight, PacingLimits, QueuedMove, Schedule, pace
from service.leader.clock import now_ms
from service.leader.cluster_view import DecisionRecord


@dataclass(frozen=True)
class MoveRequest:
    """A move that is not a shedding cycle's :class:`balancer.cycle.Move` (a drain's, an operator's):
    ``destination`` None lets placement decide (Pulsar mode: the next lookup)."""

    bundle: str
    source: str | None
    destination: str | None
    explanation: Explanation


@dataclass
class Entry:
    """One move: ``move`` has ``bundle``, ``source``, ``destination`` and ``explanation``
    (:class:`balancer.cycle.Move`, or any object with those)."""

    move: Any
    kind: str
    plan: int
    planned_ms: int
    record: DecisionRecord | None = None
    released_ms: int | None = None  # its first unload
    since_ms: int | None = None  # its last unload (Pulsar mode may send it again)
    reason: str = ""
    reissued: int = 0
    refused: int = 0
    waits_for: str | None = None  # the pacing reason it last waited for
    _queued: QueuedMove | None = field(default=None, init=False, repr=False, compare=False)
    # The move's names, taken once (its move never changes): a whole plan's entries are looked at
    # by bundle several times a tick, 140,000 property calls in a 7,883-move cycle.
    bundle: str = field(init=False, repr=False, compare=False)
    source: str | None = field(init=False, repr=False, compare=False)
    destination: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        move = self.move
        src, dest = move.source, move.destination
        self.bundle = str(move.bundle)
        self.source = None if src is None else str(src)
        self.destination = None if dest is None else str(dest)

    @property
    def move_reason(self) -> str:
        """The move's reason code, without building a cycle move's explanation (balancer.cycle.Move)."""
        reason = getattr(self.move, "reason", None)
        if isinstance(reason, str):
            return reason
        return getattr(self.move.explanation, "reason", "") or ""

    def queued(self) -> QueuedMove:
        # Made once: what it is made of never changes, and a tick paces every queued move again
        # (making 21,000 of them took longer than pacing them).
        got = self._queued
        if got is None:
            got = self._queued = QueuedMove(self.bundle, self.source, self.destination, self.kind, self.plan)
        return got

    def flight(self) -> MoveInFlight:
        since = self.since_ms if self.since_ms is not None else self.planned_ms
        return MoveInFlight(self.bundle, self.source, self.destination, self.kind, self.plan, since)


class MoveQueue:
    """Queued and in-flight moves of one leader term, and each source broker's last unload.

    ``on_planned(entry)`` returns the decision record a newly queued move is logged with;
    ``on_ended(entry, state, why)`` is told of every queued or in-flight move that ends without
    being served (replaced by a later plan, dropped with the term)."""

    def __init__(
        self,
        on_planned: Callable[[Entry], DecisionRecord | None] | None = None,
        on_ended: Callable[[Entry, str, str], None] | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._lock = threading.RLock()
        self._queued: list[Entry] = []
        self._in_flight: dict[str, Entry] = {}
        self.history: dict[str, BrokerHistory] = {}
        # Per broker, when the last unload it was the source or destination of started (any kind).
        self.started: dict[str, int] = {}
        self._plans = itertools.count(1)
        self._on_planned = on_planned
        self._on_ended = on_ended
        self._clock = clock
        self.last_schedule: Schedule | None = None
        self.last_schedule_ms: int | None = None
        self.term: int | None = None  # the leader epoch the queue belongs to

    # ---- the one entry point ------------------------------------------------------------------
    def submit(self, moves: Iterable[Any], kind: str) -> int:
        """Queue ``moves`` of ``kind`` ("shedding", "manual" or "drain"); returns the plan's number.

        A shedding plan with moves replaces every shedding move still queued (it was decided on
        newer data); one without moves leaves them to finish: a shedder that plans once and then
        waits for its conditions to hold again (BalancedShedder's confirming cycles) plans nothing
        for several cycles, and would otherwise drop its own plan half carried out. A queued move of
        a bundle submitted again is replaced by the new one.
        """
        if kind not in KINDS:
            raise InvalidInput("kind", kind, f"a move's kind is one of {', '.join(KINDS)}")
        now = self._clock()
        ended: list[tuple[Entry, str]] = []
        moves = list(moves)
        with self._lock:
            plan = next(self._plans)
            if not moves:
                return plan
            entries = [Entry(m, kind, plan, now) for m in moves]
            bundles = {e.bundle for e in entries}
            # A set, not a scan of the new plan per queued move: at 21,000 moves replacing 21,000
            # that scan was 440 million comparisons, 21 s of the cycle under the queue's lock.
            sources = {e.source for e in entries}
            keep: list[Entry] = []
            for e in self._queued:
                if kind == "shedding" and e.kind == "shedding":
                    ended.append((e, "a later shedding plan replaced it before its turn"))
                    # A re-plan that sheds a broker whose shedding was still queued carries it on:
                    # not a new shedding of that broker, so no cooldown between the two plans.
                    if e.source is not None and e.source in sources:
                        last = self.history.get(e.source, BrokerHistory())
                        self.history[e.source] = BrokerHistory(last.last_unload_ms, plan)
                elif e.bundle in bundles:
                    ended.append((e, f"submitted again ({kind})"))
                else:
                    keep.append(e)
            self._queued = keep + entries
        for e, why in ended:
            self._ended(e, "replaced", why)
        if self._on_planned is not None:
            for e in entries:
                e.record = self._on_planned(e)
        return plan

    # ---- pacing -------------------------------------------------------------------------------
    def schedule(self, now: int, limits: PacingLimits) -> Schedule:
        """What may go now (:func:`balancer.pacing.pace`); remembered for the REST views."""
        with self._lock:
            if not self._queued:
                # Nothing to release: a plan written whole leaves tens of thousands in flight, and
                # pacing them all again every tick only to release nothing cost 0.1-0.15 s a second.
                self.last_schedule, self.last_schedule_ms = Schedule(), now
                return self.last_schedule
            queue = [e.queued() for e in self._queued]
            flights = [e.flight() for e in self._in_flight.values()]
            history = dict(self.history)
            started = dict(self.started)
        sched = pace(queue, flights, history, now, limits, started)
        with self._lock:
            self.last_schedule, self.last_schedule_ms = sched, now
        return sched

    def preview(self, moves: Iterable[Any], now: int, limits: PacingLimits) -> Schedule:
        """The schedule a shedding plan of ``moves`` would get if submitted now (dry-run): nothing changes."""
        with self._lock:
            others = [e.queued() for e in self._queued if e.kind != "shedding"]
            flights = [e.flight() for e in self._in_flight.values()]
            history = dict(self.history)
            carried = {e.source for e in self._queued if e.kind == "shedding" and e.source is not None}
            started = dict(self.started)
        plan = -1
        for broker in carried:
            history[broker] = BrokerHistory(history.get(broker, BrokerHistory()).last_unload_ms, plan)
        mine = [QueuedMove(m.bundle, m.source, m.destination, "shedding", plan) for m in moves]
        return pace(others + mine, flights, history, now, limits, started)

    def take_many(self, bundles: Iterable[str], now: int) -> list[Entry]:
        """Take these bundles' queued moves to be written now, in queue order. Each counts as in
        flight at once, since its write lets the service lock go and the next tick must see the slot
        taken (:meth:`released` when written, :meth:`forget` when refused)."""
        wanted = set(bundles)
        with self._lock:
            taken = [e for e in self._queued if e.bundle in wanted]
            self._queued = [e for e in self._queued if e.bundle not in wanted]
            for entry in taken:
                entry.since_ms = now
                self._started(entry, now)
                self._in_flight.setdefault(entry.bundle, entry)
        return taken

    def released(self, entry: Entry, now: int) -> None:
        """``entry``'s unload was written: in flight from now (an earlier move of the bundle, past
        its served timeout, is given up)."""
        self.released_many([entry], now)

    def released_many(self, entries: Iterable[Entry], now: int) -> None:
        """:meth:`released` of each of ``entries`` (a whole plan written), under one lock."""
        given_up: list[Entry] = []
        with self._lock:
            in_flight, history = self._in_flight, self.history
            for entry in entries:
                bundle = entry.bundle
                earlier = in_flight.get(bundle)
                entry.released_ms = entry.since_ms = now
                self._started(entry, now)
                entry.reason = entry.move_reason
                in_flight[bundle] = entry
                if entry.kind == "shedding" and entry.source is not None:
                    history[entry.source] = BrokerHistory(now, entry.plan)
                if earlier is not None and earlier is not entry:
                    given_up.append(earlier)
        for earlier in given_up:
            self._ended(earlier, "unserved", "its bundle was unloaded again before it was served")

    def _started(self, entry: Entry, now: int) -> None:
        for broker in (entry.source, entry.destination):
            if broker is not None:
                self.started[broker] = max(now, self.started.get(broker, now))

    def last_started(self, broker: str) -> int | None:
        """When the last unload ``broker`` was the source or destination of started."""
        with self._lock:
            return self.started.get(broker)

    def track(self, move: Any, kind: str, now: int) -> Entry:
        """A move written outside the queue (an operator's unload): followed until served, and
        counted against the in-flight caps meanwhile."""
        with self._lock:
            entry = Entry(move, kind, next(self._plans), now)
            self.released(entry, now)
            return entry

    def served(self, bundle: str, now: int) -> Entry | None:
        """``bundle`` is served at its destination: no longer in flight. The source's last unload is
        now (Pulsar records the time an unload completes)."""
        with self._lock:
            entry = self._in_flight.pop(bundle, None)
            if entry is not None and entry.kind == "shedding" and entry.source is not None:
                last = self.history.get(entry.source)
                self.history[entry.source] = BrokerHistory(now, last.plan if last is not None else entry.plan)
            return entry

    def forget(self, bundle: str, entry: Entry | None = None) -> Entry | None:
        """Stop following ``bundle``'s move in flight (given up; or ``entry``, refused, only if it is
        the one followed)."""
        with self._lock:
            if entry is not None and self._in_flight.get(bundle) is not entry:
                return None
            return self._in_flight.pop(bundle, None)

    def drop(self, why: str) -> int:
        """The term is over: every queued and in-flight move is forgotten, each logged as dropped."""
        with self._lock:
            gone = self._queued + list(self._in_flight.values())
            self._queued, self._in_flight = [], {}
            self.history = {}
            self.started = {}
            self.last_schedule = None
            self.term = None
        for e in gone:
            self._ended(e, "dropped", why)
        return len(gone)

    def _ended(self, entry: Entry, state: str, why: str) -> None:
        if self._on_ended is not None:
            self._on_ended(entry, state, why)

    # ---- reads --------------------------------------------------------------------------------
    def queued(self) -> list[Entry]:
        with self._lock:
            return list(self._queued)

    def in_flight(self) -> list[Entry]:
        with self._lock:
            return list(self._in_flight.values())

    def get_in_flight(self, bundle: str) -> Entry | None:
        with self._lock:
            return self._in_flight.get(bundle)

    def waiting(self) -> dict[str, Explanation]:
        """Why each queued move waited at the last schedule."""
        with self._lock:
            sched = self.last_schedule
        return {} if sched is None else {m.bundle: why for m, why in sched.waiting}

    def __len__(self) -> int:
        with self._lock:
            return len(self._queued) + len(self._in_flight)
