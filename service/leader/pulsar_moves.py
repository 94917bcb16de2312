"""``PulsarMoveCheck``: in Pulsar mode, a move in flight that Pulsar placed elsewhere is unloaded
again to its destination, a bounded number of times.

An unload with ``destinationBroker`` only records an affinity on Pulsar's leader broker; the bundle
is placed by the next client lookup. Pulsar 4.0.7 spends that affinity when the destination's first
lookup meets the old owner's ownership lock ("Failed to acquire ownership"), and the retried lookup
is placed by Pulsar's own strategy (2 of about 10 test runs here). The decision log then said one
broker while Pulsar served the bundle from another, and the next cycles decided on a cluster that
did not look as planned.

A mixin of :class:`service.leader.jobs.LeaderJobs`. The moves followed are the move queue's in flight
(:mod:`service.leader.move_queue`; the move tick, :mod:`service.leader.move_tick`, reads where each
is owned): a bundle owned by another broker than its destination is unloaded again to the same
destination, at most :data:`REISSUES` times, each recorded as a decision (reason
``destination_not_honoured``) and counted as an unload with that reason. An unload Pulsar refuses
(the bundle is mid-move: "being unloaded", HTTP 5xx) is tried again at the next tick, at most
:data:`REFUSALS` times. Past either bound the move is given up (state ``unserved``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import _GeneratorContextManager
from typing import TYPE_CHECKING, Any

from balancer.explain import Explanation, explain
from service.errors import ServiceError

if TYPE_CHECKING:
    from service.leader.cluster_view import DecisionRecord
    from service.leader.executors import Executor
    from service.leader.metrics_sink import MetricsSink
    from service.leader.move_queue import Entry

log = logging.getLogger(__name__)

# Unloads sent again per move, at most. Pulsar's misses come in runs under load (its unload takes
# longer, the clients' lookups race it longer): a CI run found an operator's bundle elsewhere 145 s on.
REISSUES = 3
REFUSALS = 3  # unloads again that Pulsar refused, per move, before it is left where it is
UNOWNED_FOR_MS = 10 * 60_000  # a bundle nobody looks up stays unowned: stop watching it


class PulsarMoveCheck:
    if TYPE_CHECKING:
        executor: Executor
        metrics: MetricsSink
        reissued_moves: int

        def _writing(self, bundles: Iterable[str]) -> _GeneratorContextManager[None]: ...

        def is_leader(self) -> bool: ...

        def _record(self, kind: Any, explanation: Explanation, **kw: Any) -> DecisionRecord: ...

        def _unserved(self, entry: Entry, now: int, why: str) -> None: ...

    def _reissue(self, p: Entry, where: str, now_ms: int) -> bool:
        """``p`` is owned by ``where``, not its destination: unload it again there; True when sent."""
        dest = p.destination
        assert dest is not None
        if p.reissued >= REISSUES or not self.is_leader():
            log.warning(
                "%s: Pulsar serves it from %s, not %s, after %d unload(s) to %s; left there",
                p.bundle,
                where,
                dest,
                p.reissued + 1,
                dest,
            )
            self._unserved(
                p, now_ms, f"Pulsar serves it from {where} after {p.reissued + 1} unload(s) to {dest}"
            )
            return False
        why = explain(
            "destination_not_honoured",
            f"Pulsar placed the bundle on {where}, not on {dest} as decided ({p.reason}): "
            f"unloaded again to {dest}",
            subject=p.bundle,
            decidedReason=p.reason,
            placedOn=where,
            reissue=p.reissued + 1,
        )
        try:
            # Pulsar's unload takes a second or more: the service lock is let go meanwhile.
            with self._writing((p.bundle,)):
                self.executor.unload(p.bundle, where, dest, why.reason)
        except ServiceError as e:
            p.refused += 1
            log.warning(
                "%s: unloading it again to %s failed (%d of %d): %s", p.bundle, dest, p.refused, REFUSALS, e
            )
            if p.refused >= REFUSALS:
                self._unserved(p, now_ms, f"Pulsar refused {REFUSALS} unloads of it again to {dest}: {e}")
            return False
        p.reissued += 1
        p.since_ms = now_ms
        self.reissued_moves += 1
        self.metrics.unloaded(why.reason)  # loadmgr_bundles_unloaded_total{reason=...}
        log.warning("%s: Pulsar placed it on %s, not %s: unloaded again", p.bundle, where, dest)
        self._record(p.kind, why, bundle=p.bundle, source=where, destination=dest)
        return True
