"""``ClusterReads``: the cluster as REST reads it (view, decision log, dry run, namespace admin).

A mixin of :class:`service.leader.service.LoadManagerService`, kept in its own module so ``service.py``
stays under the ~400-line guideline. ``view`` and ``decisions`` read what the jobs published and
never wait for the service lock a job may hold for seconds; ``dry_run`` takes it, since it copies the
strategies' state.
"""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any

from balancer.bundles import NamespaceBundles
from balancer.cycle import CyclePlan, plan_shedding_cycle
from balancer.errors import PreconditionFailed
from balancer.pacing import PacingLimits
from service.leader.clock import now_ms
from service.leader.cluster_view import ClusterView, DecisionLog, DecisionRecord
from service.zookeeper.metadata.namespaces import NamespaceAdmin

# Pulsar mode writes nothing of Pulsar's (docs/pulsar-mode.md): namespaces go through Pulsar's admin.
PULSAR_OWNS_NAMESPACES = (
    "in Pulsar mode namespaces are Pulsar's: use pulsar-admin namespaces create, delete, "
    "set-anti-affinity-group or ns-isolation-policy"
)

if TYPE_CHECKING:
    import threading

    from balancer.config import LoadBalancerConfig
    from balancer.placement.base import PlacementStrategy
    from balancer.shedding.base import LoadSheddingStrategy
    from service.leader.jobs import LeaderJobs
    from service.leader.load_view import LoadView
    from service.leader.metrics_sink import MetricsSink
    from service.settings import Settings
    from service.zookeeper.metadata.store import ZkStore


class ClusterReads:
    """``view``, ``decisions``, ``dry_run``, ``namespaces`` and ``create_namespace``."""

    if TYPE_CHECKING:
        # Provided by LoadManagerService, the only class this mixes into.
        store: ZkStore
        settings: Settings
        metrics: MetricsSink
        _config: LoadBalancerConfig
        _lock: threading.RLock
        _shedder: LoadSheddingStrategy
        _placement: PlacementStrategy
        _decisions: DecisionLog
        _view_cache: ClusterView | None
        _loadview: LoadView
        _published: tuple[dict[str, Any], dict[str, int]]
        jobs: LeaderJobs

        def is_leader(self) -> bool: ...

        def leader_info(self) -> dict[str, Any] | None: ...

    def view(self) -> ClusterView:
        """A fresh read of the cluster (cached for one second)."""
        cached = self._view_cache
        if cached is not None and now_ms() - cached.time_ms < 1000:
            return cached
        return self._publish_view()

    def _publish_view(self) -> ClusterView:
        """The cluster as the watch cache has it (one cheap sync), never a full read of ZooKeeper."""
        leader = self.is_leader()
        snap = self._loadview.snapshot(self.store, now_ms(), bundle_data=not leader)
        # Jobs publish the leader's bundle data after each run: a job holding the service lock for
        # seconds at 100k bundles never makes a REST read wait.
        published, recent = self._published
        bundle_data = dict(published) if leader else {}
        v = ClusterView(
            time_ms=now_ms(),
            leader=self.leader_info(),
            brokers=snap.brokers,
            bundle_data=bundle_data or snap.stored_bundle_data,
            owners={b: o.broker for b, o in snap.owners.items()},
            assignments={b: a.value.broker for b, a in snap.assignments.items()},
            namespaces={ns: got.value.bundle_names for ns, got in snap.layouts.items()},
            recently_unloaded=recent,
            malformed=dict(self.store.malformed),
        )
        self._view_cache = v
        w = self._config.weights()
        scores = {b: {"weightedMaxUsage": d.max_resource_usage_with_weight(w)} for b, d in v.brokers.items()}
        self.metrics.view_updated(v, scores)
        return v

    def decisions(self, limit: int = 100, kind: str | None = None) -> list[DecisionRecord]:
        """Newest first; ``kind`` is shedding, placement, split or manual."""
        return self._decisions.latest(limit, kind)

    def dry_run(self) -> CyclePlan:
        """What a shedding cycle would do now, on copies: nothing is written, no state changes.

        The copies are refreshed from ZooKeeper first, as the cycle itself does: the leader's own
        view is only as fresh as its last cycle, which can be a whole shedding interval old."""
        with self._lock:
            view = self._loadview.shadow()
            shedder, placement = copy.deepcopy((self._shedder, self._placement))
            now = now_ms()
            view.refresh(self.store, now, (shedder, placement))
            return plan_shedding_cycle(
                view.load, self._config, shedder, placement, view.ctx, now, random.Random(0)
            )

    def dry_run_schedule(self) -> tuple[CyclePlan, dict[str, Any]]:
        """:meth:`dry_run`, and when its moves would go under the disruption budget
        (``balancer/pacing.py``) given the moves queued and in flight now: which at once, which wait
        and why. Nothing is queued."""
        plan = self.dry_run()
        with self._lock:
            now = now_ms()
            moves = self.jobs.moves
            sched = moves.preview(plan.moves, now, PacingLimits.of(self._config))
            flights = moves.in_flight()
            others = [e for e in moves.queued() if e.kind != "shedding"]
        return plan, {
            "timeMs": now,
            "now": [m.bundle for m in sched.release if m.plan == -1],
            "waiting": [
                {
                    "bundle": m.bundle,
                    "source": m.source,
                    "destination": m.destination,
                    **why.model_dump(mode="json"),
                }
                for m, why in sched.waiting
                if m.plan == -1
            ],
            "inFlight": [
                {
                    "bundle": e.bundle,
                    "source": e.source,
                    "destination": e.destination,
                    "kind": e.kind,
                    "releasedMs": e.released_ms,
                }
                for e in flights
            ],
            "queuedOtherKinds": len(others),
        }

    def namespaces(self) -> NamespaceAdmin:
        """Namespace administration on this instance's session: plain compare-and-set writes of
        Pulsar's admin nodes, so any instance may serve them; the leader reads them on refresh.
        In Pulsar mode namespaces are Pulsar's: listed, never written (412 naming pulsar-admin)."""
        return NamespaceAdmin(self.store, PULSAR_OWNS_NAMESPACES if self.settings.pulsar_mode else None)

    def create_namespace(self, namespace: str, num_bundles: int | None = None) -> NamespaceBundles:
        """Write a namespace's initial layout (``defaultNumberOfNamespaceBundles``); idempotent."""
        if self.settings.pulsar_mode:
            raise PreconditionFailed("mode", "pulsar", PULSAR_OWNS_NAMESPACES)
        return self.store.create_namespace(
            namespace, num_bundles or self._config.defaultNumberOfNamespaceBundles
        )
