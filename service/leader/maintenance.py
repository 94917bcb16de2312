"""``Maintenance``: cordon, uncordon and drain a broker (``docs/drain.md``), in both modes.

A mixin of :class:`service.leader.service.LoadManagerService`. The state is in ZooKeeper
(:mod:`service.leader.cordons`), watched by every instance; the operator's requests run on the
leader, which validates them against what it reads now and writes fenced. A thread of its own
ticks the drain (:class:`service.leader.drain.DrainSequencer`) while this instance leads and its
term's first sync is done: a new leader picks a drain up where the last one left it.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from balancer.drain import remaining
from balancer.errors import Conflict, InvalidInput, UnknownBroker
from balancer.explain import explain
from service.leader.clock import now_ms
from service.leader.cordons import Cordon, MaintenanceBook
from service.leader.drain import RUNNING, STOPPED, DrainState
from service.leader.drain_runner import DrainRunner

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


class Maintenance(DrainRunner):
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

    def _init_maintenance(self) -> None:
        self.book = MaintenanceBook(self.store, self._maintenance_changed)
        self._drain_wake = threading.Event()
        self._drain_stop = threading.Event()
        self._drain_thread: threading.Thread | None = None
        self._cordon_kept: dict[str, tuple[int, frozenset[str]]] = {}  # see cordon_sweep
        self._drain_idle_left: dict[str, int] = {}  # see DrainRunner.drain_tick
        self._drain_prealloc = {}  # see service.leader.drain_prealloc

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
            elsewhere = self._loadview.owners_elsewhere
            owners = (elsewhere() if elsewhere is not None else None) or self.store.read_owners()
            owned = [b for b, o in owners.items() if o.broker == broker]
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
