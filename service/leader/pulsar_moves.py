"""``PulsarMoveCheck``: in Pulsar mode, look where each move landed, and unload it again once when
Pulsar put it elsewhere.

An unload with ``destinationBroker`` only records an affinity on Pulsar's leader broker; the bundle
is placed by the next client lookup. Pulsar 4.0.7 spends that affinity when the destination's first
lookup meets the old owner's ownership lock ("Failed to acquire ownership"), and the retried lookup
is placed by Pulsar's own strategy (2 of about 10 test runs here). The decision log then said one
broker while Pulsar served the bundle from another, and the next cycles decided on a cluster that
did not look as planned.

A mixin of :class:`service.leader.jobs.LeaderJobs`. Each applied shedding move, and each operator
unload that names a destination (an operator who names one wants the bundle there), is remembered; every
refresh of the view (reconcile, shedding) looks at the ownership it read: at the destination, the
move is done; unowned, it waits (no client has looked the bundle up yet), for at most
:data:`UNOWNED_FOR_MS`; owned by another broker, the unload is sent again to the same destination,
at most :data:`REISSUES` times, each recorded as a decision (reason ``destination_not_honoured``) and
counted as an unload with that reason. An unload Pulsar refuses (the bundle is mid-move: "being
unloaded", HTTP 5xx) is tried again at the next refresh, at most :data:`REFUSALS` times. A
destination that left, a bundle that was split or deleted, a lost leadership: dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import _GeneratorContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from balancer.explain import Explanation, explain
from service.errors import ServiceError

if TYPE_CHECKING:
    from service.leader.cluster_view import DecisionRecord
    from service.leader.executors import Executor
    from service.leader.load_view import Snapshot
    from service.leader.metrics_sink import MetricsSink

log = logging.getLogger(__name__)

# Unloads sent again per move, at most. Pulsar's misses come in runs under load (its unload takes
# longer, the clients' lookups race it longer): a CI run found an operator's bundle elsewhere 145 s on.
REISSUES = 3
REFUSALS = 3  # unloads again that Pulsar refused, per move, before it is left where it is
UNOWNED_FOR_MS = 10 * 60_000  # a bundle nobody looks up stays unowned: stop watching it


@dataclass
class _Pending:
    destination: str
    reason: str
    since_ms: int  # when the last unload for it was sent
    kind: str = "shedding"  # the decision it follows up: the leader's, or an operator's ("manual")
    reissued: int = 0
    refused: int = 0


class PulsarMoveCheck:
    if TYPE_CHECKING:
        executor: Executor
        metrics: MetricsSink
        reissued_moves: int
        _pending_moves: dict[str, _Pending]
        in_flight: frozenset[str]

        def _writing(self, bundles: Iterable[str]) -> _GeneratorContextManager[None]: ...

        @property
        def zk_native(self) -> bool: ...

        def is_leader(self) -> bool: ...

        def _record(self, kind: Any, explanation: Explanation, **kw: Any) -> DecisionRecord: ...

    def _expect_move(
        self, bundle: str, destination: str | None, reason: str, now_ms: int, kind: str = "shedding"
    ) -> None:
        """Remember an applied move in Pulsar mode (nothing to check without a destination)."""
        if self.zk_native or destination is None:
            return
        self._pending_moves[bundle] = _Pending(destination, reason, now_ms, kind)

    def _check_moves(self, snap: Snapshot, now_ms: int) -> int:
        """Look where each remembered move landed; returns the unloads sent again."""
        pending = self._pending_moves
        if not pending or self.zk_native:
            return 0
        live = snap.live_bundles()
        sent = 0
        for bundle, p in sorted(pending.items()):
            if bundle in self.in_flight:  # an unload of it is under way (the lock let go meanwhile)
                continue
            owner = snap.owners.get(bundle)
            where = owner.broker if owner is not None else None
            if bundle not in live or p.destination not in snap.brokers or where == p.destination:
                pending.pop(bundle, None)
                continue
            if where is None:
                if now_ms - p.since_ms > UNOWNED_FOR_MS:
                    pending.pop(bundle, None)
                continue
            if p.reissued >= REISSUES or not self.is_leader():
                log.warning(
                    "%s: Pulsar serves it from %s, not %s, after %d unload(s) to %s; left there",
                    bundle,
                    where,
                    p.destination,
                    p.reissued + 1,
                    p.destination,
                )
                pending.pop(bundle, None)
                continue
            why = explain(
                "destination_not_honoured",
                f"Pulsar placed the bundle on {where}, not on {p.destination} as decided "
                f"({p.reason}): unloaded again to {p.destination}",
                subject=bundle,
                decidedReason=p.reason,
                placedOn=where,
                reissue=p.reissued + 1,
            )
            try:
                # Pulsar's unload takes a second or more: the service lock is let go meanwhile, so an
                # operator's unload may replace this entry; it is only this attempt's bookkeeping.
                with self._writing((bundle,)):
                    self.executor.unload(bundle, where, p.destination, why.reason)
            except ServiceError as e:
                p.refused += 1
                log.warning(
                    "%s: unloading it again to %s failed (%d of %d): %s",
                    bundle,
                    p.destination,
                    p.refused,
                    REFUSALS,
                    e,
                )
                if p.refused >= REFUSALS and pending.get(bundle) is p:
                    del pending[bundle]
                continue
            p.reissued += 1
            p.since_ms = now_ms
            sent += 1
            self.reissued_moves += 1
            self.metrics.unloaded(why.reason)  # loadmgr_bundles_unloaded_total{reason=...}
            log.warning("%s: Pulsar placed it on %s, not %s: unloaded again", bundle, where, p.destination)
            self._record(p.kind, why, bundle=bundle, source=where, destination=p.destination)
        return sent
