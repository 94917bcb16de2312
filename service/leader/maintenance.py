"""``Maintenance``: cordon, uncordon and drain a broker (``docs/drain.md``), in both modes.

A mixin of :class:`service.leader.service.LoadManagerService`. The state is in ZooKeeper
(:mod:`service.leader.cordons`), watched by every instance; the operator's requests run on the
leader, which validates them against what it reads now and writes fenced. A thread of its own
ticks the drain (:class:`service.leader.drain.DrainSequencer`) while this instance leads and its
term's first sync is done: a new leader picks a drain up where the last one left it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from balancer.cycle import Move
from balancer.drain import DrainStep, drain_moves, remaining
from balancer.errors import Conflict, InvalidInput, UnknownBroker
from balancer.explain import explain
from service.errors import ServiceError, StaleWrite
from service.leader.clock import now_ms
from service.leader.cordons import Cordon, MaintenanceBook
from service.leader.drain import DONE, FAILED, RUNNING, STOPPED, DrainSequencer, DrainState, Observation

if TYPE_CHECKING:
    from balancer.config import LoadBalancerConfig
    from balancer.placement.base import PlacementStrategy
    from balancer.shedding.base import LoadSheddingStrategy
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


class Maintenance:
    if TYPE_CHECKING:
        store: ZkStore
        election: LeaderElection
        executor: Executor
        jobs: LeaderJobs
        metrics: MetricsSink
        pulsar_mode: bool
        pulsar_admin: PulsarAdmin | None
        _lock: threading.RLock
        _config: LoadBalancerConfig
        _shedder: LoadSheddingStrategy
        _placement: PlacementStrategy
        _loadview: LoadView
        _synced: bool
        _started: bool

        def is_leader(self) -> bool: ...

        def _require_leader(self) -> None: ...

        def pulsar_acting(self) -> bool: ...

    drain_served_timeout_ms: int = SERVED_TIMEOUT_MS

    def _init_maintenance(self) -> None:
        self.book = MaintenanceBook(self.store, self._maintenance_changed)
        self._drain_wake = threading.Event()
        self._drain_stop = threading.Event()
        self._drain_thread: threading.Thread | None = None

    def _start_maintenance(self) -> None:
        self.book.start()
        self._drain_stop.clear()
        self._drain_thread = threading.Thread(target=self._drain_loop, name="drain", daemon=True)
        self._drain_thread.start()

    def _stop_maintenance(self) -> None:
        self._drain_stop.set()
        self._drain_wake.set()
        if self._drain_thread is not None:
            self._drain_thread.join(timeout=5)

    def _maintenance_changed(self) -> None:
        self._loadview.cordoned = self.book.cordoned()
        self._drain_wake.set()

    # ---- reads (every instance) ----------------------------------------------------------------------
    def cordons(self) -> dict[str, Cordon]:
        return dict(self.book.cordons)

    def drain_state(self) -> DrainState | None:
        return self.book.drain

    # ---- the operator's requests (leader) --------------------------------------------------------------
    def cordon(self, broker: str, principal: str | None = None, reason: str = "operator") -> Cordon:
        """Cordon a live broker (idempotent). Refused (409) when no other live broker could then
        take a bundle; UnknownBroker (404) for a broker that is not live."""
        self._require_leader()
        with self._lock:
            live = self.store.broker_ids()
            if broker not in live:
                raise UnknownBroker(broker)

            def change(current: dict[str, Cordon]) -> dict[str, Cordon]:
                if broker in current:
                    return current
                free = sorted(set(live) - set(current) - {broker})
                if not free:
                    raise Conflict(
                        "broker",
                        broker,
                        "cordoning it would leave no live broker to take bundles "
                        f"(cordoned: {', '.join(sorted(current)) or 'none'})",
                    )
                current[broker] = Cordon(broker, now_ms(), principal, reason)
                return current

            was = broker in self.book.cordons
            new = self.book.update_cordons(change, self.election.fence())
            self._loadview.cordoned = frozenset(new)
            if not was:
                self._maintenance_decision("cordon", f"{broker} cordoned ({reason})", broker, principal)
            return new[broker]

    def uncordon(self, broker: str, principal: str | None = None) -> None:
        """Uncordon a broker (idempotent for a live one). Refused (409) while a drain of it runs."""
        self._require_leader()
        with self._lock:
            drain = self.book.drain
            if drain is not None and drain.active and drain.broker == broker:
                raise Conflict("broker", broker, "a drain of it is running: stop the drain first")
            if broker not in self.book.cordons and broker not in self.store.broker_ids():
                raise UnknownBroker(broker)

            def change(current: dict[str, Cordon]) -> dict[str, Cordon]:
                current.pop(broker, None)
                return current

            was = broker in self.book.cordons
            new = self.book.update_cordons(change, self.election.fence())
            self._loadview.cordoned = frozenset(new)
            if was:
                self._maintenance_decision("uncordon", f"{broker} uncordoned", broker, principal)

    def drain(self, broker: str, then_shutdown: bool = False, principal: str | None = None) -> DrainState:
        """Cordon ``broker`` and start moving its bundles off, one at a time; the same broker's
        stopped drain resumes. Refused: an unknown broker (404); another drain running, the last
        live uncordoned broker, ``then_shutdown`` outside Pulsar mode (409 / 422)."""
        if then_shutdown and not self.pulsar_mode:
            raise InvalidInput(
                "thenShutdown",
                True,
                "only in Pulsar mode: a ZooKeeper-native agent has no broker to shut down",
            )
        self._require_leader()
        with self._lock:
            live = self.store.broker_ids()
            if broker not in live:
                raise UnknownBroker(broker)
            current, version = self.book.read_drain()
            if current is not None and current.active:
                if current.broker == broker:
                    return current
                raise Conflict(
                    "broker", broker, f"a drain of {current.broker} is running: one drain at a time"
                )
            if not set(live) - set(self.book.cordons) - {broker}:
                raise Conflict(
                    "broker",
                    broker,
                    "no other live broker is uncordoned: its bundles would have nowhere to go",
                )
            self.cordon(broker, principal, reason="drain")
            now = now_ms()
            owned = [b for b, o in self.store.read_owners().items() if o.broker == broker]
            todo = len(remaining(owned))
            if current is not None and current.broker == broker and current.state == STOPPED:
                state = current
                state.state, state.message = RUNNING, f"resumed by {principal or 'anonymous'}"
                state.then_shutdown = state.then_shutdown or then_shutdown
            else:
                state = DrainState(broker, RUNNING, now, now, principal, then_shutdown, total=todo)
                state.message = "started"
            state.updated_ms = now
            state.remaining = todo
            self.book.write_drain(state, self.election.fence(), version)
            self._maintenance_decision(
                "drain_started",
                f"drain of {broker} {'resumed' if state.moved else 'started'}: {todo} bundle(s) to move",
                broker,
                principal,
                remaining=todo,
                thenShutdown=then_shutdown,
            )
        self._drain_wake.set()
        return state

    def stop_drain(self, broker: str, principal: str | None = None) -> DrainState:
        """Stop the running drain of ``broker`` after its bundle in flight; the broker stays cordoned."""
        self._require_leader()
        with self._lock:
            current, version = self.book.read_drain()
            if current is None or not current.active or current.broker != broker:
                running = current.broker if current is not None and current.active else "none"
                raise Conflict("broker", broker, f"no drain of it is running (running: {running})")
            current.state = STOPPED
            current.updated_ms = now_ms()
            current.message = f"stopped by {principal or 'anonymous'}"
            self.book.write_drain(current, self.election.fence(), version)
            self._maintenance_decision(
                "drain_stopped", f"drain of {broker} stopped after {current.moved} move(s)", broker, principal
            )
            return current

    def _maintenance_decision(
        self, reason: str, message: str, broker: str, principal: str | None, **n: Any
    ) -> None:
        why = explain(reason, message, subject=broker, principal=principal, **n)
        self.jobs._record("manual", why, source=broker, principal=principal)

    # ---- the drain's thread ------------------------------------------------------------------------
    def _drain_loop(self) -> None:
        while not self._drain_stop.is_set():
            drain = self.book.drain
            busy = drain is not None and drain.active
            self._drain_wake.wait(TICK_S if busy else IDLE_S)
            self._drain_wake.clear()
            if not busy or not self._started or not self.is_leader() or not self._synced:
                continue
            if not self.pulsar_acting():
                continue  # Pulsar mode while the brokers' own load manager acts: nothing moves
            try:
                self.drain_tick()
            except StaleWrite as e:
                log.warning("drain: write refused (%s); no longer acting as the leader here", e)
            except ServiceError as e:
                log.warning("drain: %s", e)
            except Exception:  # the thread must live: the next tick tries again
                log.exception("drain tick failed")

    def drain_tick(self) -> bool:
        """One step of the running drain (the leader only); True when something changed."""
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
            obs = Observation(owners, live, set(snap.brokers), now)
            ver = [version]

            def persist(s: DrainState) -> None:
                ver[0] = self.book.write_drain(s, self.election.fence(), ver[0])

            def plan(skip: set[str]) -> DrainStep:
                ctx = self._loadview.ctx
                if state.broker not in ctx.cordoned:
                    raise StaleWrite(
                        f"{state.broker} is not cordoned any more; the drain waits for its cordon"
                    )
                return drain_moves(
                    state.broker,
                    owned,
                    self._loadview.load,
                    self._config,
                    self._placement,
                    ctx,
                    self.jobs.rng,
                    skip=skip | set(self.jobs.in_flight),
                )

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
            seq = DrainSequencer(persist, self._drain_submit, self._drain_event, self.drain_served_timeout_ms)
            changed = seq.tick(state, obs, owned, plan)
            if state.state == DONE and state.then_shutdown and state.shutdown is None:
                self._shutdown_broker(state, snap.brokers.get(state.broker), persist)
            return changed

    def _drain_submit(self, moves: list[Move]) -> list[Move]:
        """Carry out a drain's moves now (the one-in-flight sequencer); the disruption budget's
        ``MoveQueue.submit(moves, "drain")`` takes this place when it is there."""
        applied: list[Move] = []
        for move in moves:
            if move.bundle in self.jobs.in_flight:
                continue  # another job's or an operator's write of it is under way
            with self.jobs._writing((move.bundle,)):
                self.executor.unload(move.bundle, move.source, move.destination, move.explanation.reason)
            # The shedder leaves it alone for the grace period (it would otherwise look movable while
            # its old owner still reports it), as it does a bundle it moved itself.
            self._loadview.load.recently_unloaded_bundles[move.bundle] = now_ms()
            self.jobs._expect_move(
                move.bundle, move.destination, move.explanation.reason, now_ms(), kind="drain"
            )
            applied.append(move)
        return applied

    def _drain_event(self, kind: str, state: DrainState, move: Move | None, why: str) -> None:
        if kind == "move" and move is not None:
            self.jobs._record(
                "drain",
                move.explanation,
                bundle=move.bundle,
                source=move.source,
                destination=move.destination,
            )
            self.metrics.unloaded(move.explanation.reason)
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
                admin.shutdown_broker(base)
            except ServiceError as e:
                state.shutdown = f"failed: {e}"[:300]
            else:
                state.shutdown = "requested"
        state.updated_ms = now_ms()
        with contextlib.suppress(ServiceError):
            persist(state)
        expl = explain(
            "drain_shutdown", f"graceful shutdown of {state.broker}: {state.shutdown}", subject=state.broker
        )
        self.jobs._record("drain", expl, source=state.broker)

    # ---- what status, brokers and /metrics show ----------------------------------------------------
    def maintenance(self) -> dict[str, Any]:
        drain = self.book.drain
        return {
            "cordoned": {b: {"broker": b, **c.to_json()} for b, c in sorted(self.book.cordons.items())},
            "drain": drain_view(drain),
        }


def drain_view(state: DrainState | None) -> dict[str, Any] | None:
    """The drain as REST shows it: the node's fields plus progress."""
    if state is None:
        return None
    doc = state.to_json()
    done = state.moved
    total = max(state.total, done + state.remaining)
    doc["progress"] = {"moved": done, "total": total, "fraction": (done / total) if total else 1.0}
    return doc
