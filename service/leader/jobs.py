"""The leader's periodic work, one method per APScheduler job, plus the moves they share.

Every job runs under the service lock: it takes one snapshot, decides purely with ``balancer``,
then writes; before each write it re-checks leadership, and every write is fenced on the leader
epoch (see ``docs/ownership.md``), so a job that outlives its leadership writes nothing.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from balancer.bundles import split_bundle_name
from balancer.config import LoadBalancerConfig
from balancer.cycle import CyclePlan, plan_shedding_cycle
from balancer.errors import InvalidInput, UnknownBundle
from balancer.explain import Explanation, explain
from balancer.loaddata import top_k_bundles_to_write
from balancer.placement.base import PlacementStrategy
from balancer.placement.pipeline import assign_bundle
from balancer.shedding.base import LoadSheddingStrategy
from balancer.split.algorithms import (
    SPECIFIED_POSITIONS_DIVIDE,
    resolve_algorithm,
    split_boundaries,
    split_layout,
)
from balancer.split.conditions import find_bundles_to_split
from service.errors import ServiceError, StaleWrite
from service.leader.cluster_view import DecisionLog, DecisionRecord
from service.leader.executors import Executor, ZkExecutor
from service.leader.load_view import LoadView, Snapshot
from service.zookeeper import paths as P
from service.zookeeper.store import ZkStore

if TYPE_CHECKING:
    from service.leader.metrics_sink import MetricsSink

log = logging.getLogger(__name__)
TOPIC_FREE_ALGORITHMS = ("range_equally_divide", SPECIFIED_POSITIONS_DIVIDE)


def now_ms() -> int:
    return int(time.time() * 1000)


class LeaderJobs:
    """Shedding cycle, orphan reconciliation, bundle-data writer and auto split, for one leader."""

    def __init__(
        self,
        store: ZkStore,
        executor: Executor,
        assigner: ZkExecutor,
        view: LoadView,
        decisions: DecisionLog,
        metrics: MetricsSink,
        history: Any,
        is_leader: Callable[[], bool],
        epoch: Callable[[], int | None],
        rng: random.Random,
    ) -> None:
        self.store = store
        self.executor = executor
        self.assigner = assigner
        self.view = view
        self.decisions = decisions
        self.metrics = metrics
        self.history = history
        self.is_leader = is_leader
        self.epoch = epoch
        self.rng = rng
        self.last_plan: CyclePlan | None = None
        self.cycles = 0
        self.bundle_data_conflicts = 0

    @property
    def zk_native(self) -> bool:
        return isinstance(self.executor, ZkExecutor)

    def _record(self, kind: Any, explanation: Explanation, **kw: Any) -> DecisionRecord:
        explanation.numbers.setdefault("leaderEpoch", self.epoch())
        return self.decisions.add(now_ms(), kind, explanation, **kw)

    # ---- shedding ----------------------------------------------------------------------------------
    def shedding_cycle(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> CyclePlan | None:
        started = time.monotonic()
        now = now_ms()
        snap = self.view.refresh(self.store, now, (shedder, placement), sample=True)
        if self.zk_native:
            self._reconcile(snap, config, placement)
        if not self.is_leader():
            return None
        plan = plan_shedding_cycle(self.view.load, config, shedder, placement, self.view.ctx, now, self.rng)
        applied = 0
        for move in plan.moves:
            if not self.is_leader():
                log.warning("leadership lost mid-cycle; %s stays on %s", move.bundle, move.source)
                self.view.load.recently_unloaded_bundles.pop(move.bundle, None)
                break
            try:
                self.executor.unload(move.bundle, move.source, move.destination, move.explanation.reason)
            except ServiceError as e:
                self.view.load.recently_unloaded_bundles.pop(move.bundle, None)
                self._record(
                    "shedding",
                    move.explanation,
                    bundle=move.bundle,
                    source=move.source,
                    destination=move.destination,
                    applied=False,
                )
                log.warning("move of %s refused: %s", move.bundle, e)
                if isinstance(e, StaleWrite):
                    break
                continue
            applied += 1
            self._record(
                "shedding",
                move.explanation,
                bundle=move.bundle,
                source=move.source,
                destination=move.destination,
            )
            self.metrics.unloaded(move.explanation.reason)
        self.last_plan = plan
        self.cycles += 1
        if self.history is not None:
            self.history.append_cycle(now, self.view.load, snap.owner_map())
        self.metrics.cycle_finished(time.monotonic() - started, applied)
        return plan

    # ---- orphans -----------------------------------------------------------------------------------
    def reconcile(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> int:
        snap = self.view.refresh(self.store, now_ms(), (shedder, placement), sample=False)
        return self._reconcile(snap, config, placement) if self.zk_native else 0

    def _reconcile(self, snap: Snapshot, config: LoadBalancerConfig, placement: PlacementStrategy) -> int:
        """Give every unowned bundle whose assignment is missing or names a dead broker a live broker."""
        live = snap.live_bundles()
        assigned = 0
        for bundle, stale in sorted(snap.assignments.items()):
            if bundle not in live and self.is_leader():  # left over from a split or a deleted namespace
                self.store.fenced(self.assigner.current_fence()).delete(
                    P.assignment_path(bundle), stale.version
                ).commit()
        if not snap.brokers:
            return 0
        for bundle in sorted(live):
            if bundle in snap.owners:
                continue
            a = snap.assignments.get(bundle)
            if a is not None and a.value.broker in snap.brokers:
                continue  # the assigned broker has not taken it yet
            decision = assign_bundle(
                bundle,
                self.view.load,
                config,
                placement,
                self.view.ctx,
                self.rng,
                stored_bundle_data=snap.stored_bundle_data.get(bundle),
            )
            if decision.broker is None or not self.is_leader():
                continue
            why = explain(
                "orphan_assigned" if a is not None else "new_bundle_assigned",
                f"unowned bundle placed on {decision.broker}"
                + (f" (its assigned broker {a.value.broker} is gone)" if a is not None else ""),
                subject=bundle,
                placement=decision.explanation.reason,
                candidates=len(decision.candidates),
            )
            try:
                self.assigner.assign(bundle, decision.broker, why.reason, None if a is None else a.version)
            except StaleWrite as e:
                log.info("assignment of %s lost a race: %s", bundle, e)
                continue
            assigned += 1
            self._record(
                "placement",
                why,
                bundle=bundle,
                source=None if a is None else a.value.broker,
                destination=decision.broker,
            )
        return assigned

    # ---- bundle data and time averages ---------------------------------------------------------------
    def write_bundle_data(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> int:
        snap = self.view.refresh(self.store, now_ms(), (shedder, placement), sample=True)
        if not self.is_leader():
            return 0
        load = self.view.load
        written = 0
        conflicts: list[str] = []
        try:
            fence = self.assigner.current_fence()
        except StaleWrite:
            return 0  # leadership ended since the check above
        for bundle in top_k_bundles_to_write(load, config):
            # Compare-and-set: a node the long-term job changed since the refresh above is left as it
            # is; the next refresh adopts its longTermData and the write after that goes through.
            # Fenced on the epoch: a write refused because leadership moved on ends the job.
            try:
                version = self.store.write_bundle_data_cas(
                    bundle, load.bundle_data[bundle], self.view.expected_version(bundle), fence
                )
            except StaleWrite:
                if not self.is_leader():
                    break
                conflicts.append(bundle)
                continue
            self.view.wrote(bundle, version)
            written += 1
        if conflicts:
            self.bundle_data_conflicts += len(conflicts)
            log.info(
                "bundle data of %d bundle(s) changed by another writer, e.g. %s; not overwritten",
                len(conflicts),
                conflicts[0],
            )
        for broker, data in load.broker_data.items():
            self.store.write_time_average(broker, data.time_average_data)
        for broker in self.store.children(P.TIME_AVERAGE):
            if broker not in snap.brokers:
                self.store.delete_time_average(broker)
        # Unlike Pulsar, a bundle in transit keeps its node: only bundles gone from every layout lose it.
        live = snap.live_bundles()
        for bundle in snap.stored_bundle_data:
            if bundle not in live:
                self.store.delete_bundle_data(bundle, fence)
        return written

    # ---- split -------------------------------------------------------------------------------------------
    def auto_split(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> int:
        snap = self.view.refresh(self.store, now_ms(), (shedder, placement), sample=False)
        counts = {ns: len(got.value.ranges) for ns, got in snap.layouts.items()}
        done = 0
        for cand in find_bundles_to_split(self.view.load, config, counts):
            if not self.is_leader():
                break
            try:
                self.split(cand.bundle, None, None, config, snap, cand.explanation, kind="split")
                done += 1
            except (ServiceError, InvalidInput, UnknownBundle) as e:
                log.warning("auto split of %s skipped: %s", cand.bundle, e)
        return done

    def split(
        self,
        bundle: str,
        algorithm: str | None,
        positions: Sequence[int] | None,
        config: LoadBalancerConfig,
        snap: Snapshot,
        why: Explanation,
        kind: Any = "manual",
    ) -> DecisionRecord:
        ns, rng = split_bundle_name(bundle)
        layout = snap.layouts.get(ns)
        if layout is None or not layout.value.contains(rng):
            raise UnknownBundle(bundle)
        owner = snap.owners.get(bundle)
        unload = config.loadBalancerAutoUnloadSplitBundlesEnabled
        if self.executor.remote_split:
            self.executor.split(bundle, algorithm, positions, unload=unload)
            children: list[str] = []
        else:
            alg = resolve_algorithm(algorithm, config) if algorithm is None else algorithm
            if alg not in TOPIC_FREE_ALGORITHMS:
                raise InvalidInput(
                    "algorithm", alg, "needs topic names, which the ZooKeeper executor does not have"
                )
            stats = self.view.load.broker_data.get(owner.broker) if owner else None
            n_topics = (
                stats.local_data.last_stats[bundle].topics
                if stats and bundle in stats.local_data.last_stats
                else 2
            )
            topics = [f"{bundle}#{i}" for i in range(max(n_topics, 2))]
            cuts = split_boundaries(alg, rng, config, topics=topics, positions=positions)
            if split_layout(layout.value, rng, cuts) is None:
                raise InvalidInput("bundle", bundle, f"{alg} yields no boundary inside {rng.text}")
            children = self.executor.split(bundle, SPECIFIED_POSITIONS_DIVIDE, cuts, unload=unload)
            why.numbers.setdefault("algorithm", alg)
            why.numbers.setdefault("boundaries", [f"0x{c:08x}" for c in cuts])
        self.view.forget(bundle)
        why.numbers.setdefault("children", children)
        self.metrics.split_done(why.reason)
        return self._record(kind, why, bundle=bundle, source=owner.broker if owner else None)
