"""``SplitJobs``: the leader's bundle splits, automatic (the ``split`` job) and operator-requested.

A mixin of :class:`service.leader.jobs.LeaderJobs`, kept in its own module so ``jobs.py`` stays under
the ~400-line guideline; it runs under the same service lock and uses the jobs' view, executor and
reconcile, so a split's children are placed exactly as the reconcile job would place them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import _GeneratorContextManager
from typing import TYPE_CHECKING, Any

from balancer.bundles import split_bundle_name
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, UnknownBundle
from balancer.explain import Explanation
from balancer.placement.base import PlacementStrategy
from balancer.shedding.base import LoadSheddingStrategy
from balancer.split.algorithms import (
    SPECIFIED_POSITIONS_DIVIDE,
    resolve_algorithm,
    split_boundaries,
    split_layout,
)
from balancer.split.conditions import find_bundles_to_split, split_enabled
from balancer.split.unload import split_unload
from service.errors import ServiceError
from service.leader.clock import now_ms
from service.leader.cluster_view import DecisionRecord
from service.leader.load_view import Snapshot

if TYPE_CHECKING:
    from service.leader.executors import Executor
    from service.leader.load_view import LoadView
    from service.leader.metrics_sink import MetricsSink
    from service.zookeeper.metadata.store import ZkStore

log = logging.getLogger(__name__)
TOPIC_FREE_ALGORITHMS = ("range_equally_divide", SPECIFIED_POSITIONS_DIVIDE)


class SplitJobs:
    """Auto split and split, for one leader; the state they use is ``LeaderJobs``'s."""

    if TYPE_CHECKING:
        # Provided by LeaderJobs, the only class this mixes into.
        store: ZkStore
        executor: Executor
        view: LoadView
        metrics: MetricsSink
        is_leader: Callable[[], bool]
        in_flight: frozenset[str]

        @property
        def zk_native(self) -> bool: ...

        def _writing(self, bundles: Iterable[str]) -> _GeneratorContextManager[None]: ...

        def _record(self, kind: Any, explanation: Explanation, **kw: Any) -> DecisionRecord: ...

        def _reconcile(
            self, snap: Snapshot, config: LoadBalancerConfig, placement: PlacementStrategy
        ) -> int: ...

    # ---- split -------------------------------------------------------------------------------------------
    def auto_split(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> int:
        snap = self.view.refresh(self.store, now_ms(), (shedder, placement))
        if split_enabled(self.view.load, config) is not None:
            return 0  # switched off, or a single broker: Pulsar's checkNamespaceBundleSplit returns too
        counts = {ns: len(got.value.ranges) for ns, got in snap.layouts.items()}
        done = 0
        for cand in find_bundles_to_split(self.view.load, config, counts):
            if not self.is_leader():
                break
            if cand.bundle in self.in_flight:  # an operator's unload or split of it is under way
                continue
            unload, unload_why = split_unload(cand.bundle, cand.broker, self.view.load, config, self.view.ctx)
            cand.explanation.numbers.update(unload=unload, unloadReason=unload_why.reason)
            try:
                self.split(
                    cand.bundle,
                    None,
                    None,
                    config,
                    snap,
                    cand.explanation,
                    kind="split",
                    unload=unload,
                    strategies=(shedder, placement),
                )
                done += 1
            except (ServiceError, InvalidInput, UnknownBundle) as e:
                log.warning("auto split of %s skipped: %s", cand.bundle, e)
        self.metrics.auto_splits(done)
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
        unload: bool = False,
        strategies: tuple[LoadSheddingStrategy, PlacementStrategy] | None = None,
    ) -> DecisionRecord:
        """Split ``bundle``; with ``unload`` its children are unloaded and placed afresh (Pulsar's
        ``split?unload=true``), otherwise they stay with the parent's owner (the admin default)."""
        ns, rng = split_bundle_name(bundle)
        layout = snap.layouts.get(ns)
        if layout is None or not layout.value.contains(rng):
            raise UnknownBundle(bundle)
        owner = snap.owners.get(bundle)
        alg = resolve_algorithm(algorithm, config)  # 412 for a name outside the supported list
        if self.executor.remote_split:
            # Pulsar's split, then its bundle list read back for up to 10 s: the lock let go meanwhile.
            with self._writing((bundle,)):
                children = self.executor.split(bundle, algorithm, positions, unload=unload)
        else:
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
        why.numbers.setdefault("unload", unload)
        if unload and strategies is not None and self.zk_native and self.is_leader():
            # The children were left unassigned: place them now, as Pulsar's next lookup would.
            fresh = self.view.refresh(self.store, now_ms(), strategies)
            self._reconcile(fresh, config, strategies[1])
        self.metrics.split_done(why.reason)
        return self._record(kind, why, bundle=bundle, source=owner.broker if owner else None)
