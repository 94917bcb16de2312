"""``DrainRunner``: the thread that carries a running drain out, and the Pulsar-mode cordon sweep.

A mixin of :class:`service.leader.service.LoadManagerService` (through
:class:`service.leader.maintenance.Maintenance`). It ticks while this instance leads and its term's
first sync is done, so a new leader picks a drain up where the last one left it: each tick reads
the drain node and the ownership afresh, asks :func:`balancer.drain.drain_moves` for the next
move and hands it to :class:`service.leader.drain.DrainSequencer`, which keeps one in flight.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from balancer.cycle import Move
from balancer.drain import DrainStep, drain_moves, intruders
from balancer.explain import Explanation, explain
from service.errors import ServiceError, StaleWrite
from service.leader.clock import now_ms
from service.leader.drain import DONE, FAILED, DrainSequencer, DrainState, Observation
from service.leader.drain_prealloc import DrainPreallocations

if TYPE_CHECKING:
    from balancer.config import LoadBalancerConfig
    from balancer.placement.base import PlacementStrategy
    from balancer.shedding.base import LoadSheddingStrategy
    from service.leader.cordons import MaintenanceBook
    from service.leader.election import LeaderElection
    from service.leader.executors import Executor
    from service.leader.jobs import LeaderJobs
    from service.leader.load_view import LoadView
    from service.leader.metrics_sink import MetricsSink
    from service.pulsar.admin import PulsarAdmin
    from service.zookeeper.metadata.store import ZkStore

log = logging.getLogger("service.leader.service")

TICK_S = 0.2  # how often a running drain looks whether its bundle in flight is served
IDLE_S = 2.0
SERVED_TIMEOUT_MS = 30_000
# Pulsar mode: its admin unload answers once the bundle is released, and the drain's next tick runs
# after that answer, so the drained broker owning the bundle this long after the move started means a
# lookup placed it back there (Pulsar drops the destination's affinity when that broker's first lookup
# meets the old ownership lock; its own placement then picks the broker that just emptied). Twice on
# real brokers the drain waited the whole served timeout (30 s) before moving it again.
PULSAR_BACK_AFTER_MS = 5_000
SWEEP_S = 5.0  # Pulsar mode: how often cordoned brokers are looked at for bundles Pulsar placed there


class DrainRunner(DrainPreallocations):
    if TYPE_CHECKING:
        store: ZkStore
        election: LeaderElection
        executor: Executor
        jobs: LeaderJobs
        metrics: MetricsSink
        book: MaintenanceBook
        pulsar_mode: bool
        pulsar_admin: PulsarAdmin | None
        _lock: threading.RLock
        _config: LoadBalancerConfig
        _shedder: LoadSheddingStrategy
        _placement: PlacementStrategy
        _loadview: LoadView
        _synced: bool
        _started: bool
        _drain_wake: threading.Event
        _drain_stop: threading.Event
        _cordon_kept: dict[str, tuple[int, frozenset[str]]]  # broker -> (cordon's since, kept)
        _drain_idle_left: dict[str, int]  # per drained broker: idle bundles it still owns (last full tick)

        def is_leader(self) -> bool: ...

        def pulsar_acting(self) -> bool: ...

    drain_served_timeout_ms: int = SERVED_TIMEOUT_MS

    # ---- the drain's thread ------------------------------------------------------------------------
    def _drain_loop(self) -> None:
        next_sweep = 0.0
        while not self._drain_stop.is_set():
            drain = self.book.drain
            busy = drain is not None and drain.active
            self._drain_wake.wait(TICK_S if busy else IDLE_S)
            self._drain_wake.clear()
            if not self._started or not self.is_leader() or not self._synced:
                self._cordon_kept = {}  # a new term looks afresh at what cordoned brokers own
                self._drain_idle_left = {}
                self._drain_prealloc = {}  # a new term's view starts without preallocations
                continue
            if not self.pulsar_acting():
                continue  # Pulsar mode while the brokers' own load manager acts: nothing moves
            sweep = self.pulsar_mode and bool(self.book.cordons) and time.monotonic() >= next_sweep
            try:
                if self._drain_prealloc:
                    with self._lock:
                        self._expire_preallocations(now_ms())
                if busy:
                    self.drain_tick()
                if sweep:
                    next_sweep = time.monotonic() + SWEEP_S
                    self.cordon_sweep()
            except StaleWrite as e:
                log.warning("drain: write refused (%s); no longer acting as the leader here", e)
            except ServiceError as e:
                log.warning("drain: %s", e)
            except Exception:  # the thread must live: the next tick tries again
                log.exception("drain tick failed")

    def cordon_sweep(self) -> int:
        """Pulsar mode: move off each cordoned broker (the drained one aside: the drain does) one
        bundle Pulsar placed on it since it was cordoned; returns the moves made. Pulsar's lookup
        places bundles itself and loadmgr cannot veto it; the baseline is what the broker owned when
        this leader first saw it cordoned."""
        moved = 0
        with self._lock:
            if not self.is_leader():
                return 0
            cordoned = self.book.cordoned()
            drain = self.book.drain
            draining = drain.broker if drain is not None and drain.active else None
            snap = self._loadview.refresh(self.store, now_ms(), (self._shedder, self._placement))
            self._cordon_kept = {b: k for b, k in self._cordon_kept.items() if b in cordoned}
            drained = drain.broker if drain is not None and drain.state == DONE else None
            for broker in sorted(cordoned - {draining}):
                owned = [b for b, o in snap.owners.items() if o.broker == broker]
                # A drained broker keeps nothing (heartbeat bundles aside): whatever Pulsar put back
                # on it after the drain (a lookup, or a move Pulsar placed there) goes again.
                # (Only under the cordon that drain worked under: one set again later keeps what it has.)
                cordon = self.book.cordons.get(broker)
                since = cordon.since_ms if cordon is not None else 0
                same = drain is not None and since <= drain.started_ms
                seen = self._cordon_kept.get(broker)
                # A baseline belongs to one cordon: cordoned again since, the broker is seen afresh.
                baseline = seen[1] if seen is not None and seen[0] == since else None
                kept, gained = intruders(frozenset() if broker == drained and same else baseline, owned)
                self._cordon_kept[broker] = (since, kept)
                for bundle in [b for b in gained if b not in self.jobs.in_flight][:1]:
                    step = drain_moves(
                        broker,
                        [bundle],
                        self._loadview.load,
                        self._config,
                        self._placement,
                        self._loadview.ctx,
                        self.jobs.rng,
                    )
                    if not step.moves:
                        continue
                    dest = step.moves[0].destination
                    why = explain(
                        "placed_on_cordoned",
                        f"{bundle} was placed on cordoned {broker} (Pulsar's lookup): moved to {dest}",
                        subject=bundle,
                        source=broker,
                        destination=dest,
                        placement=step.moves[0].explanation.numbers.get("placement"),
                    )
                    move = Move(bundle, broker, dest, why)
                    try:
                        applied = self._drain_submit([move])
                    except Exception:
                        self._release_preallocation(bundle, dest)  # not moved: nothing counts it there
                        raise
                    if not applied:
                        self._release_preallocation(bundle, dest)
                        continue
                    self._track_preallocations(step.preallocated, now_ms())
                    moved += 1
                    self.jobs._record("drain", why, bundle=bundle, source=broker, destination=dest)
                    self.metrics.unloaded(why.reason)
        return moved

    def drain_tick(self) -> bool:
        """One step of the running drain (the leader only); True when something changed."""
        state, _ = self.book.read_drain()
        if state is None or not state.active:
            return False
        if state.in_flight is not None and self._on_its_way(state):
            return False  # two node reads, no refresh of the whole view, no service lock
        if state.in_flight is None and self._budget_full(state):
            return False  # the next bundle goes when the cluster's moves in flight leave room
        if (
            state.in_flight is None
            and self._drain_idle_left.get(state.broker) == 0
            and self._spacing_hold(state.broker, now_ms()) is not None
        ):
            return False  # only bundles with traffic are left, and their spacing holds
        with contextlib.suppress(ServiceError):
            self._loadview.prefetch(self.store)  # the reads outside the service lock, as the jobs do
        with self._lock:
            if not self.is_leader():
                return False
            state, version = self.book.read_drain()
            if state is None or not state.active:
                return False
            now = now_ms()
            snap = self._loadview.refresh(self.store, now, (self._shedder, self._placement))
            live = snap.live_bundles()
            owners = {b: o.broker for b, o in snap.owners.items()}
            owned = sorted(b for b, o in owners.items() if o == state.broker and b in live)
            assigned = {b: a.value.broker for b, a in snap.assignments.items()}
            # Pulsar mode: an idle bundle stays unowned after its unload until some client looks it
            # up; ZooKeeper-native agents take every bundle at once, so there it is waited for.
            report = snap.brokers.get(state.broker) if not self.jobs.zk_native else None
            stats = report.last_stats if report is not None else {}
            idle = {b for b, st in stats.items() if st.msg_rate_in + st.msg_rate_out <= 0.0}
            skipped = set(state.given_up) | set(self.jobs.in_flight)
            self._drain_idle_left[state.broker] = len([b for b in owned if b in idle and b not in skipped])
            hold = self._spacing_hold(state.broker, now)
            obs = Observation(owners, live, set(snap.brokers), now, idle)
            ver = [version]

            def persist(s: DrainState) -> None:
                ver[0] = self.book.write_drain(s, self.election.fence(), ver[0])

            planned: list[str] = []

            def plan(skip: set[str]) -> DrainStep:
                ctx = self._loadview.ctx
                if state.broker not in ctx.cordoned:
                    raise StaleWrite(
                        f"{state.broker} is not cordoned any more; the drain waits for its cordon"
                    )
                step = drain_moves(
                    state.broker,
                    owned,
                    self._loadview.load,
                    self._config,
                    self._placement,
                    ctx,
                    self.jobs.rng,
                    skip=skip | set(self.jobs.in_flight),
                    idle=idle,
                    hold=hold,
                )
                planned.extend(step.preallocated)
                return step

            f = state.in_flight
            if (
                f is not None
                and self.jobs.zk_native
                and owners.get(f.bundle) == state.broker
                and assigned.get(f.bundle) != f.destination
            ):
                # ZooKeeper-native: the assignment never named the destination, so the move was never
                # written (a leader that stopped between recording it and writing it): choose again.
                log.info("drain: %s was recorded in flight but never moved; choosing again", f.bundle)
                state.in_flight = None
            if state.in_flight is not None:
                self._adopt_in_flight(state.in_flight.bundle, state.in_flight.destination, now)
            self._expire_preallocations(now)
            seq = DrainSequencer(
                persist,
                self._drain_submit,
                self._drain_event,
                self.drain_served_timeout_ms,
                None if self.jobs.zk_native else PULSAR_BACK_AFTER_MS,
                self._release_preallocation,
            )
            try:
                changed = seq.tick(state, obs, owned, plan)
            finally:
                self._track_preallocations(planned, now)
            due = state.state == DONE and state.then_shutdown and state.shutdown is None
            data = snap.brokers.get(state.broker)
        if due:
            # Outside the service lock: Pulsar answers once the broker has closed, which may take up
            # to its brokerShutdownTimeoutMs (60 s by default).
            self._shutdown_broker(state, data, persist)
        return changed

    def _on_its_way(self, state: DrainState) -> bool:
        """The bundle in flight is neither served nor given up on yet, read from its own nodes only
        (a drain ticks five times a second; refreshing the whole view each time would not do at
        100,000 bundles). False whenever the full tick has something to decide."""
        f = state.in_flight
        assert f is not None
        if now_ms() - f.since_ms >= self.drain_served_timeout_ms:
            return False
        where = self._owner_now(f.bundle)
        if where is None:
            # ZooKeeper-native agents take it at once; in Pulsar mode an idle one may wait for ever.
            return self.jobs.zk_native
        if where != state.broker:
            return False
        if self.jobs.zk_native:
            assigned = self.store.read_assignment(f.bundle)
            return assigned is not None and assigned.value.broker == f.destination
        return now_ms() - f.since_ms < PULSAR_BACK_AFTER_MS

    def _owner_now(self, bundle: str) -> str | None:
        """Who owns ``bundle`` now, read where the brokers keep it: Extensible brokers write no
        ``/namespace`` node, so there the service-unit state channel answers (read there, a drain
        on Extensible brokers saw every bundle in flight as unowned and refreshed the whole view
        five times a second until each transfer showed)."""
        elsewhere = self._loadview.owners_elsewhere
        owners = elsewhere() if elsewhere is not None else None
        got = owners.get(bundle) if owners is not None else self.store.read_owner(bundle)
        return got.broker if got is not None else None

    def _spacing_hold(self, broker: str, now: int) -> Explanation | None:
        """Why the drain's next bundle with traffic waits: an unload the drained broker took part in
        (an idle bundle's too: its clients reconnect, and its destination loads its topics) started
        under ``loadBalancerUnloadSpacingSeconds`` ago. Idle bundles are not held: their unload
        delays no producer. On real brokers, eight unloads within 6 s (each served before the next)
        piled their clients' reconnections into the same seconds; and a busy bundle sent to a broker
        still taking an idle one moved 0.5 s before had the drain's longest publish gap, 3.1 s
        (BENCHMARKS, "Drain vs Pulsar's graceful shutdown")."""
        spacing = int(self._config.loadBalancerUnloadSpacingSeconds * 1000)
        last = self.jobs.moves.last_started(broker)
        if spacing <= 0 or last is None or now - last >= spacing:
            return None
        return explain(
            "spacing",
            f"the next bundle with traffic goes {spacing / 1000:g} s after the last unload "
            "(loadBalancerUnloadSpacingSeconds), so that the clients of two moves do not reconnect "
            "in the same seconds",
            subject=broker,
            spacingMs=spacing,
            lastUnloadMs=last,
        )

    def _budget_full(self, state: DrainState) -> bool:
        """The disruption budget's cluster-wide cap (``loadBalancerMaxUnloadsInFlight``) is taken by
        moves in flight (shedding's, operators', this drain's own): the drain waits its turn. Its own
        pace (one bundle in flight, the next once it is served) is the per-broker cap of 1; the
        spacing between its bundles with traffic is :meth:`_spacing_hold`."""
        now = now_ms()
        cap = self._config.loadBalancerMaxUnloadsInFlight
        if cap <= 0:
            return False
        timeout = self._config.loadBalancerUnloadServedTimeoutSeconds * 1000
        holding = [
            e
            for e in self.jobs.moves.in_flight()
            if e.since_ms is None or timeout <= 0 or now - e.since_ms < timeout
        ]
        return len(holding) >= cap

    def _drain_submit(self, moves: list[Move]) -> list[Move]:
        """Carry out a drain's moves now (the sequencer keeps one in flight) and hand each to the
        move queue, which follows it until served (the served-time histogram, kind "drain") and
        counts it against the disruption budget's caps, so shedding waits for it as for its own."""
        applied: list[Move] = []
        for move in moves:
            if move.bundle in self.jobs.in_flight:
                continue  # another job's or an operator's write of it is under way
            with self.jobs._writing((move.bundle,)):
                self.executor.unload(move.bundle, move.source, move.destination, move.explanation.reason)
            # The shedder leaves it alone for the grace period (it would otherwise look movable while
            # its old owner still reports it), as it does a bundle it moved itself.
            self._loadview.load.recently_unloaded_bundles[move.bundle] = now_ms()
            self.jobs.moves.track(move, "drain", now_ms())
            # Not followed up to its destination in Pulsar mode (destination_not_honoured): a drain
            # wants the bundle off the broker, and another uncordoned broker is as good as the one
            # decided; moving it again would cost its clients a second gap. One Pulsar puts back on
            # a cordoned broker is moved off by cordon_sweep.
            applied.append(move)
        return applied

    def _drain_event(self, kind: str, state: DrainState, move: Move | None, why: str) -> None:
        if kind == "move" and move is not None:
            record = self.jobs._record(
                "drain",
                move.explanation,
                bundle=move.bundle,
                source=move.source,
                destination=move.destination,
                state="in_flight",
            )
            self.metrics.unloaded(move.explanation.reason)
            entry = self.jobs.moves.get_in_flight(move.bundle)
            if entry is not None and entry.kind == "drain":
                entry.record = record  # its state (in flight, served) shows on /decisions
        elif kind == "refused" and move is not None:
            self.jobs._record(
                "drain",
                move.explanation,
                bundle=move.bundle,
                source=move.source,
                destination=move.destination,
                applied=False,
            )
            log.warning("drain: move of %s refused: %s", move.bundle, why)
        elif kind in (DONE, FAILED):
            expl = explain(
                f"drain_{kind}",
                f"drain of {state.broker} {kind}: {why}",
                subject=state.broker,
                moved=state.moved,
                givenUp=len(state.given_up),
            )
            self.jobs._record("drain", expl, source=state.broker)
            log.info("drain of %s %s: %s", state.broker, kind, why)
        elif kind == "back":
            # Not a move of ours: Pulsar's placement put the bundle back (its next move is recorded as
            # such); said on /decisions, so that a bundle moved twice shows why.
            expl = explain(
                "drain_placed_back",
                f"Pulsar placed {why} back on {state.broker} after the drain moved it: moving it again",
                subject=why,
            )
            self.jobs._record("drain", expl, bundle=why, source=state.broker, applied=False)
            log.warning("drain: Pulsar placed %s back on %s; moving it again", why, state.broker)
        elif kind in ("stuck", "elsewhere", "unowned"):
            log.info("drain: %s %s", why, kind)

    def _shutdown_broker(self, state: DrainState, data: Any, persist: Callable[[DrainState], None]) -> None:
        """Pulsar mode: Pulsar's own graceful shutdown of the drained broker (only heartbeat
        namespaces are left on it), once; the outcome is kept in the drain's state."""
        from service.leader.pulsar_mode import broker_web_url

        admin = self.pulsar_admin
        base = broker_web_url(admin, state.broker, data) if admin is not None else None
        if admin is None or base is None:
            state.shutdown = "failed: no admin URL for the broker"
        else:
            try:
                state.shutdown = admin.shutdown_broker(base)
            except ServiceError as e:
                state.shutdown = f"failed: {e}"[:300]
        state.updated_ms = now_ms()
        with contextlib.suppress(ServiceError):
            persist(state)
        expl = explain(
            "drain_shutdown", f"graceful shutdown of {state.broker}: {state.shutdown}", subject=state.broker
        )
        self.jobs._record("drain", expl, source=state.broker)
