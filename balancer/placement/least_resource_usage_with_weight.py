"""Pulsar's LeastResourceUsageWithWeight: smoothed weighted usage, pick among the clearly-below-average."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.models import BundleData, LoadData, ResourceWeights
from balancer.placement.base import PlacementChoice, weighted_usage
from balancer.placement.lruw_scope import CycleScope


class LeastResourceUsageWithWeight:
    """h(b) = H*h_prev(b) + (1-H)*W(b); candidates with h + D <= mean(h) win, else all candidates.

    The history lives in the instance, so one instance must serve successive placements; a broker
    that reports no bundles or no traffic starts afresh (its old usage says nothing about now).
    """

    name = "LeastResourceUsageWithWeight"

    def __init__(self, history: Mapping[str, float] | None = None) -> None:
        self._history: dict[str, float] = dict(history or {})
        self._scope: CycleScope | None = None

    @property
    def history(self) -> dict[str, float]:
        """broker -> smoothed usage h (the dict itself: callers may edit it between calls)."""
        if self._scope is not None:
            self._scope.flush()
        return self._history

    @contextmanager
    def cycle_scope(self, load: LoadData, config: LoadBalancerConfig) -> Iterator[None]:
        """Calls inside with this ``load`` and ``config`` must see fixed broker data (a leader cycle):
        W and the fresh-start test are then computed once per broker and h is smoothed on plain
        floats, with the same arithmetic per call; the history is written back on exit."""
        if self._scope is not None:
            self._scope.flush()
        self._scope = CycleScope(self._history, load, config)
        try:
            yield
        finally:
            self._scope.flush()
            self._scope = None

    def _smoothed(
        self, broker: str, load: LoadData, config: LoadBalancerConfig, weights: ResourceWeights
    ) -> float | None:
        data = load.broker_data.get(broker)
        if data is None:
            return None
        local = data.local_data
        if not local.bundles or (local.msg_rate_in == 0 and local.msg_rate_out == 0):
            self._history.pop(broker, None)
        w = weighted_usage(local, weights)
        prev = self._history.get(broker)
        h_pct = config.loadBalancerHistoryResourcePercentage
        h = w if prev is None else prev * h_pct + (1 - h_pct) * w
        self._history[broker] = h
        return h

    def select_broker(
        self,
        candidates: Sequence[str],
        bundle: str,
        bundle_data: BundleData,
        load: LoadData,
        config: LoadBalancerConfig,
        rng: random.Random,
    ) -> PlacementChoice:
        if not candidates:
            return PlacementChoice(None, explain("no_candidates", "no candidate broker", subject=bundle))
        diff = config.loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100.0
        scope = self._scope
        scoped = None
        if scope is not None and scope.load is load and scope.config is config:
            scoped = scope.smooth(candidates, diff)
        elif scope is not None:
            scope.flush()
        if scoped is not None:
            usage_of, with_data, avg, best, overloaded = scoped
        else:
            usages: dict[str, float] = {}
            weights = config.weights()
            for b in candidates:
                h = self._smoothed(b, load, config, weights)
                if h is not None:
                    usages[b] = h
            avg = sum(usages.values()) / len(usages) if usages else 0.0
            best = [b for b in candidates if b in usages and usages[b] + diff <= avg]
            overloaded = sum(1 for h in usages.values() if h > config.overload_threshold)
            usage_of, with_data = usages.get, len(usages)
        fallback = not best
        pool = list(candidates) if fallback else best
        chosen = pool[0] if len(pool) == 1 else rng.choice(pool)
        msg = (
            f"no candidate is {diff:.3g} below the average usage {avg:.4g}; chose at random among all"
            if fallback
            else f"usage {usage_of(chosen):.4g} is at least {diff:.3g} below the average {avg:.4g}"
        )
        return PlacementChoice(
            chosen,
            explain(
                "all_overloaded_fallback" if fallback else "least_resource_usage",
                msg,
                subject=bundle,
                broker=chosen,
                average=avg,
                difference_threshold=diff,
                best=len(best),
                candidates=len(candidates),
                without_data=len(candidates) - with_data,
                overloaded=overloaded,
                usage=usage_of(chosen),
            ),
        )

    def best_set(self, candidates: Sequence[str], config: LoadBalancerConfig) -> list[str]:
        """The candidates a call would choose among, from the current history (for inspection)."""
        history = self.history
        usages = {b: history[b] for b in candidates if b in history}
        if not usages:
            return list(candidates)
        avg = sum(usages.values()) / len(usages)
        diff = config.loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100.0
        best = [b for b in candidates if b in usages and usages[b] + diff <= avg]
        return best or list(candidates)

    def on_active_brokers_change(self, active: set[str]) -> None:
        history = self.history
        for b in [b for b in history if b not in active]:
            del history[b]
