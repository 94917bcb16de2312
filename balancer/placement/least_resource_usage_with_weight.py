"""Pulsar's LeastResourceUsageWithWeight: smoothed weighted usage, pick among the clearly-below-average."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.models import BundleData, LoadData, ResourceWeights
from balancer.placement.base import PlacementChoice, weighted_usage


class LeastResourceUsageWithWeight:
    """h(b) = H*h_prev(b) + (1-H)*W(b); candidates with h + D <= mean(h) win, else all candidates.

    The history lives in the instance, so one instance must serve successive placements; a broker
    that reports no bundles or no traffic starts afresh (its old usage says nothing about now).
    """

    name = "LeastResourceUsageWithWeight"

    def __init__(self, history: Mapping[str, float] | None = None) -> None:
        self.history: dict[str, float] = dict(history or {})

    def _smoothed(
        self, broker: str, load: LoadData, config: LoadBalancerConfig, weights: ResourceWeights
    ) -> float | None:
        data = load.broker_data.get(broker)
        if data is None:
            return None
        local = data.local_data
        if not local.bundles or (local.msg_rate_in == 0 and local.msg_rate_out == 0):
            self.history.pop(broker, None)
        w = weighted_usage(local, weights)
        prev = self.history.get(broker)
        h_pct = config.loadBalancerHistoryResourcePercentage
        h = w if prev is None else prev * h_pct + (1 - h_pct) * w
        self.history[broker] = h
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
        usages: dict[str, float] = {}
        weights = config.weights()
        for b in candidates:
            h = self._smoothed(b, load, config, weights)
            if h is not None:
                usages[b] = h
        diff = config.loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100.0
        avg = sum(usages.values()) / len(usages) if usages else 0.0
        best = [b for b in candidates if b in usages and usages[b] + diff <= avg]
        fallback = not best
        pool = list(candidates) if fallback else best
        chosen = pool[0] if len(pool) == 1 else rng.choice(pool)
        overloaded = sorted(b for b, h in usages.items() if h > config.overload_threshold)
        msg = (
            f"no candidate is {diff:.3g} below the average usage {avg:.4g}; chose at random among all"
            if fallback
            else f"usage {usages[chosen]:.4g} is at least {diff:.3g} below the average {avg:.4g}"
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
                without_data=len(candidates) - len(usages),
                overloaded=len(overloaded),
                usage=usages.get(chosen),
            ),
        )

    def best_set(self, candidates: Sequence[str], config: LoadBalancerConfig) -> list[str]:
        """The candidates a call would choose among, from the current history (for inspection)."""
        usages = {b: self.history[b] for b in candidates if b in self.history}
        if not usages:
            return list(candidates)
        avg = sum(usages.values()) / len(usages)
        diff = config.loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100.0
        best = [b for b in candidates if b in usages and usages[b] + diff <= avg]
        return best or list(candidates)

    def on_active_brokers_change(self, active: set[str]) -> None:
        for b in [b for b in self.history if b not in active]:
            del self.history[b]
