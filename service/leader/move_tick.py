"""``PacedMoves``: the leader's move tick. Each tick (about a second, the ``moves`` job of
:mod:`service.leader.schedule`, and right after each shedding cycle) follows every move in flight
until its destination serves it, then releases what the disruption budget allows
(:func:`balancer.pacing.pace`) out of the move queue (:mod:`service.leader.move_queue`).

*Served* is read from the bundle's ownership node (``/namespace/...``), in both modes: in
ZooKeeper-native mode the destination agent's node, in Pulsar mode the owning broker's (a client's
lookup placed it). Unload to served is exported as ``loadmgr_bundle_move_served_duration_seconds``.

Before a move is released it is checked again: the bundle is still owned by its source and its
destination is a live broker; otherwise it is refused (the next shedding cycle re-plans). A fenced
write refused (:class:`service.errors.StaleWrite`) means this leader's term is over: the queue is
dropped and nothing more is released. A mixin of :class:`service.leader.jobs.LeaderJobs`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import _GeneratorContextManager
from functools import partial
from typing import TYPE_CHECKING, Any

from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation
from balancer.pacing import PacingLimits
from service.errors import ServiceError, StaleWrite
from service.leader.clock import now_ms
from service.leader.move_queue import Entry, MoveQueue
from service.leader.pulsar_moves import UNOWNED_FOR_MS
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Assignment, Versioned

if TYPE_CHECKING:
    from balancer.models import LoadData
    from service.leader.cluster_view import DecisionLog, DecisionRecord
    from service.leader.executors import Executor, ZkExecutor
    from service.leader.load_view import LoadView
    from service.leader.metrics_sink import MetricsSink
    from service.zookeeper.metadata.store import ZkStore

log = logging.getLogger(__name__)


class PacedMoves:
    if TYPE_CHECKING:
        store: ZkStore
        executor: Executor
        assigner: ZkExecutor
        view: LoadView
        decisions: DecisionLog
        metrics: MetricsSink
        history: Any
        in_flight: frozenset[str]

        def _writing(self, bundles: Iterable[str]) -> _GeneratorContextManager[None]: ...

        @property
        def zk_native(self) -> bool: ...

        def is_leader(self) -> bool: ...

        epoch: Callable[[], int | None]

        def _record(self, kind: Any, explanation: Explanation, **kw: Any) -> DecisionRecord: ...

        def _reissue(self, p: Entry, where: str, now_ms: int) -> bool: ...

    moves: MoveQueue
    moves_served = 0
    moves_released = 0

    def _init_moves(self) -> None:
        self.moves = MoveQueue(self._planned_record, self._move_ended)
        # Following without looking at every move each tick (ZooKeeper-native): the moves whose
        # source still held the bundle at the last look, as the owners tree was then (its journal
        # position) and with the brokers then live. Only those whose ownership node changed since
        # are looked at again; a change of the brokers, or a full re-read of the tree, looks at all.
        self._settled: dict[str, Entry] = {}
        self._owners_cursor: tuple[int, int] | None = None
        self._followed_brokers: set[str] | None = None

    @property
    def mode(self) -> str:
        return "zookeeper" if self.zk_native else "pulsar"

    def _planned_record(self, e: Entry) -> DecisionRecord:
        # The history gets the moves written, when they are. The explanation is built when the
        # record is read (DecisionLog.add_lazy): a whole plan's is ~20 us a move, and the log shows
        # only its last few hundred records.
        return self.decisions.add_lazy(
            now_ms(),
            e.kind,  # type: ignore[arg-type]
            partial(_planned_explanation, e.move, self.epoch()),
            bundle=e.bundle,
            source=e.source,
            destination=e.destination,
            applied=False,
            state="planned",
            planned_ms=e.planned_ms,
        )

    def _move_ended(self, e: Entry, state: str, why: str) -> None:
        # The decision log only (its own lock): a queue is dropped from the election's thread, without
        # the service lock, so the view is not touched here. A queued move was taken out of the
        # recently-unloaded map when its cycle ended (shedding_cycle); a new term reads its view afresh.
        if e.record is not None:
            self.decisions.update(
                e.record, state=state, ended_ms=now_ms(), note={"reason": state, "message": why}
            )

    def drop_moves(self, why: str) -> int:
        """Forget every queued and in-flight move (leadership lost, or a fenced write refused)."""
        n = self.moves.drop(why)
        if n:
            log.warning("move queue dropped (%d move(s)): %s", n, why)
        return n

    def track_manual(self, move: Any, record: DecisionRecord, now: int) -> None:
        """An operator's unload, written at once: followed until served like every move, and
        counted against the in-flight caps meanwhile."""
        entry = self.moves.track(move, "manual", now)
        entry.record = record

    # ---- the tick ---------------------------------------------------------------------------------
    def move_tick(self, config: LoadBalancerConfig, release: bool = True) -> int:
        """Follow the moves in flight, then release what the budget allows; returns moves released.
        ``release`` False (Pulsar mode while the brokers' own load manager acts): follow only."""
        epoch = self.epoch()
        if not self.is_leader():
            self.drop_moves("not the leader")
            return 0
        if self.moves.term is not None and epoch != self.moves.term:
            self.drop_moves(f"a new leader term (epoch {epoch})")
        self.moves.term = epoch
        if not len(self.moves):
            return 0
        now = now_ms()
        self.follow_moves(now)
        return self._release_moves(config, now) if release else 0

    def follow_moves(self, now: int) -> int:
        """Look where each move in flight is owned now; returns the moves found served."""
        flights = [e for e in self.moves.in_flight() if e.bundle not in self.in_flight]
        if not flights:
            return 0
        brokers = set(self.store.broker_ids())
        changed = self._owner_changes()
        settled = self._settled
        if changed is None or brokers != self._followed_brokers:
            settled.clear()
        elif len(settled) > 2 * len(flights) + 1024:  # served or given up since: let them go
            mine = {e.bundle for e in flights}
            self._settled = settled = {b: e for b, e in settled.items() if b in mine}
        self._followed_brokers = brokers
        # A plan written whole has tens of thousands in flight, followed every second under the
        # service lock: 0.1-0.3 s a tick at 7,883 when every one was looked at.
        look = [e for e in flights if settled.get(e.bundle) is not e or (changed and e.bundle in changed)]
        owners = self._owners_now([e.bundle for e in look]) if look else {}
        layouts: dict[str, set[str] | None] = {}  # per namespace, read once a tick
        served = 0
        for e in look:
            where = owners.get(e.bundle)
            got = self._follow(e, where, brokers, now, layouts)
            served += got
            # Nothing changes for it until its ownership node or the brokers do: the handoff is under way.
            if (
                self.zk_native
                and not got
                and where is not None
                and where == e.source
                and self.moves.get_in_flight(e.bundle) is e
            ):
                settled[e.bundle] = e
            else:
                settled.pop(e.bundle, None)
        return served

    def _owner_changes(self) -> set[str] | None:
        """The bundles whose ownership node changed since the last call (the watch-fed tree's
        journal), or None: look at every move (Pulsar mode, no tree yet, or the tree read whole)."""
        if not self.zk_native:
            return None
        cache = self.view.cache
        if cache is None or cache.store is not self.store or self.view.owners_elsewhere is not None:
            return None
        with cache.lock:
            tree = cache.watch.trees["owners"]
            if tree.needs_resync:
                return None
            cache.watch.sync(["owners"])
            changed = tree.changes_since(self._owners_cursor)
            self._owners_cursor = tree.mark()
        return changed

    def _owners_now(self, bundles: list[str]) -> dict[str, str]:
        """Each bundle's owner as its ownership node says now. ZooKeeper-native: from the view's
        watch-fed ownership tree (a plan without a budget has tens of thousands of moves in flight,
        followed every tick: only the nodes that changed are read); else, or before that tree is
        read, multiRead of every node."""
        elsewhere = self.view.owners_elsewhere() if self.view.owners_elsewhere is not None else None
        if elsewhere is not None:  # Extensible brokers: their service-unit state channel
            return {b: elsewhere[b].broker for b in bundles if b in elsewhere}
        cached = self.view.nodes_now(self.store, "owners", bundles) if self.zk_native else None
        if cached is not None:
            return {b: o.broker for b, o in cached.items()}
        paths = {P.ownership_path(b): b for b in bundles}
        nodes = self.store.get_many(list(paths))
        out: dict[str, str] = {}
        for path, (raw, stat) in nodes.items():
            owner = self.store.decode_owner(path, raw, stat)
            if owner is not None:
                out[paths[path]] = owner.broker
        return out

    def _follow(
        self, e: Entry, where: str | None, brokers: set[str], now: int, layouts: dict[str, set[str] | None]
    ) -> int:
        dest = e.destination
        # A drain wants the bundle off its broker: any other broker serving it is the move done (a
        # second unload toward the decided one would cost its clients a second gap).
        anywhere = dest is None or e.kind == "drain"
        if (dest is not None and where == dest) or (anywhere and where not in (None, e.source)):
            self._served(e, now)
            return 1
        if dest is not None and dest not in brokers:
            self._unserved(e, now, f"its destination {dest} is no longer a live broker")
        elif where is None:
            if not self._bundle_exists(e.bundle, layouts):
                self._unserved(e, now, "the bundle was split or its namespace deleted")
            elif e.since_ms is not None and now - e.since_ms > UNOWNED_FOR_MS:
                self._unserved(
                    e, now, f"unowned for over {UNOWNED_FOR_MS // 60_000} minutes (nobody looked it up)"
                )
        elif self.zk_native:
            if where != e.source:  # the source still holding it is the handoff under way
                self._unserved(e, now, f"owned by {where}: another write moved it")
        elif e.kind != "drain":  # the drain's sequencer decides what a bundle back on its broker needs
            self._reissue(e, where, now)
        return 0

    def _bundle_exists(self, bundle: str, layouts: dict[str, set[str] | None]) -> bool:
        ns = bundle.rsplit("/", 1)[0]
        if ns not in layouts:
            layout = self.store.read_layout(ns)
            layouts[ns] = None if layout is None else set(layout.value.bundle_names)
        names = layouts[ns]
        return names is not None and bundle in names

    def _served(self, e: Entry, now: int) -> None:
        self.moves.served(e.bundle, now)
        self.moves_served += 1
        if e.released_ms is not None:
            self.metrics.move_served(self.mode, e.kind, max(now - e.released_ms, 0) / 1000)
        if e.record is not None:
            self.decisions.update(e.record, state="served", served_ms=now)

    def _unserved(self, e: Entry, now: int, why: str) -> None:
        self.moves.forget(e.bundle)
        if e.record is not None:
            self.decisions.update(
                e.record, state="unserved", ended_ms=now, note={"reason": "unserved", "message": why}
            )
        log.info("%s: no longer followed: %s", e.bundle, why)

    # ---- release ----------------------------------------------------------------------------------
    def _release_moves(self, config: LoadBalancerConfig, now: int) -> int:
        sched = self.moves.schedule(now, PacingLimits.of(config))
        queued = {e.bundle: e for e in self.moves.queued()}
        for i, (m, reason) in enumerate(sched.reasons()):
            got = queued.get(m.bundle)
            # Only when the reason changes: a long queue waits tick after tick for the same reason
            # (and only then is its explanation built: balancer.pacing.Schedule).
            if got is not None and got.record is not None and got.waits_for != reason:
                got.waits_for = reason
                self.decisions.update(got.record, note=sched.explain_waiting(i).model_dump(mode="json"))
        if not sched.release:
            return 0
        brokers = set(self.store.broker_ids())
        taken = self.moves.take_many([m.bundle for m in sched.release], now)
        owners = self._owners_now([e.bundle for e in taken])
        ready: list[Entry] = []
        for e in taken:
            invalid = self._invalid(e, brokers, owners.get(e.bundle))
            if invalid is None:
                ready.append(e)
            else:
                self._refuse(e, invalid, now)
        return self._write_moves(ready, now)

    def _invalid(self, e: Entry, brokers: set[str], owner: str | None) -> str | None:
        if e.destination is not None and e.destination not in brokers:
            return f"its destination {e.destination} is no longer a live broker"
        if e.bundle in self.in_flight:
            return "an operator's unload or split of it is under way"
        # Unowned is not "moved": mid-handoff (ZooKeeper-native) or not looked up since (Pulsar).
        if e.source is not None and owner is not None and owner != e.source:
            return f"no longer on {e.source} (owned by {owner})"
        return None

    def _write_moves(self, entries: list[Entry], now: int) -> int:
        if not entries:
            return 0
        if not self.is_leader():
            for e in entries:
                self._refuse(e, "leadership lost before the move was written", now)
            self.drop_moves("leadership lost")
            return 0
        written = self._write_batched(entries, now) if self.zk_native else self._write_each(entries, now)
        sources = {e.source for e in written if e.kind == "shedding"}
        if sources:  # Pulsar's doLoadShedding counts brokers and bundles unloaded
            self.metrics.shedding_unloads(len(sources), sum(1 for e in written if e.kind == "shedding"))
        return len(written)

    def _write_each(self, entries: list[Entry], now: int) -> list[Entry]:
        """Pulsar mode: one admin call per move, the service lock let go meanwhile."""
        done: list[Entry] = []
        for i, e in enumerate(entries):
            try:
                with self._writing((e.bundle,)):
                    # The destination's warm-up may take seconds (a broker that just joined: 10 s on
                    # real brokers): the move starts, for the spacing and the served time, once it is done.
                    self.executor.prepare(e.bundle, e.destination)
                    sent = max(now, now_ms())
                    self.executor.unload(e.bundle, e.source, e.destination, e.move_reason)
            except ServiceError as err:
                self._refuse(e, str(err), now)
                if isinstance(err, StaleWrite):
                    for rest in entries[i + 1 :]:
                        self._refuse(rest, str(err), now)
                    self.drop_moves(f"a fenced write was refused: {err}")
                    break
                continue
            self._released(e, sent)
            done.append(e)
        return done

    def _write_batched(self, entries: list[Entry], now: int) -> list[Entry]:
        """ZooKeeper-native: fenced, compare-and-set on each assignment as read now."""
        by_bundle = {e.bundle: e for e in entries}
        # Compare-and-set on the version the watch-fed tree has now (this leader's own writes are
        # noted in it): one that changed since is refused by ZooKeeper, not overwritten.
        current: dict[str, Versioned[Assignment]] | None = self.view.nodes_now(
            self.store, "assignments", list(by_bundle)
        )
        if current is None:
            current = {}
            paths = {P.assignment_path(b): b for b in by_bundle}
            for path, (raw, stat) in self.store.get_many(list(paths)).items():
                assigned = self.store.decode_assignment(path, raw, stat)
                if assigned is not None:
                    current[paths[path]] = assigned
        written: dict[str, Assignment] = {}
        try:
            with self._writing(by_bundle):
                result = self.assigner.unload_many(
                    ((e.bundle, e.source, e.destination, e.move_reason) for e in entries), current, written
                )
        except ServiceError as err:
            for e in entries:
                self._refuse(e, str(err), now)
            if isinstance(err, StaleWrite):
                self.drop_moves(f"a fenced write was refused: {err}")
            return []
        done: list[Entry] = []
        notes: list[tuple[str, bytes | None, int, Assignment | None]] = []
        seen: set[str] = set()
        for op, version in result.done:  # an assignment and its hint share the bundle's key
            got = by_bundle.get(op.key)
            if got is None or got.bundle in seen:
                continue
            seen.add(got.bundle)
            doc = op.data if op.kind != "delete" else None
            notes.append((got.bundle, doc, version, written.get(got.bundle)))
            done.append(got)
        self.view.wrote_assignments(notes)
        self._released_many(done, now)
        for op, why in result.refused:
            got = by_bundle.get(op.key)
            if got is not None and got.bundle not in seen:
                seen.add(got.bundle)
                self._refuse(got, why, now)
        if result.fenced_out:
            self.drop_moves("a fenced write was refused: leadership lost")
        return done

    def _released(self, e: Entry, now: int) -> None:
        self._released_many([e], now)

    def _released_many(self, entries: list[Entry], now: int) -> None:
        """Each of ``entries`` was written: in flight, on /decisions and in the history (a whole
        plan's moves at once: one lock each, the history's writer woken once)."""
        if not entries:
            return
        self.moves.released_many(entries, now)  # sets each entry's reason
        self.moves_released += len(entries)
        recent = self._load().recently_unloaded_bundles
        for e in entries:
            if e.kind != "manual":  # as Pulsar: an operator's unload does not exempt the bundle from shedding
                recent[e.bundle] = now
        records = [e for e in entries if e.record is not None]
        if records:
            self.decisions.update_many(
                [e.record for e in records if e.record is not None],
                applied=True,
                state="in_flight",
                released_ms=now,
                note=None,
            )
            if self.history is not None and hasattr(self.history, "append_decisions"):
                self.history.append_decisions((e.record, e.reason) for e in records)
            elif self.history is not None and hasattr(self.history, "append_decision"):
                for e in records:
                    self.history.append_decision(e.record)
        for e in entries:
            self.metrics.unloaded(e.reason)

    def _refuse(self, e: Entry, why: str, now: int) -> None:
        self.moves.forget(e.bundle, e)
        self._load().recently_unloaded_bundles.pop(e.bundle, None)
        if e.record is not None:
            self.decisions.update(
                e.record,
                applied=False,
                state="refused",
                ended_ms=now,
                note={"reason": "refused", "message": why},
            )
        log.warning("move of %s refused: %s", e.bundle, why)

    def _load(self) -> LoadData:
        return self.view.load


def _planned_explanation(move: Any, epoch: int | None) -> Explanation:
    """A planned move's explanation as its decision record shows it (built when first read)."""
    why: Explanation = move.explanation
    why.numbers.setdefault("leaderEpoch", epoch)
    return why
