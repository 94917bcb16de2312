"""Pulsar's default placement: the broker with the least long-term message rate, overloaded last."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.models import BrokerData, BundleData, LoadData, ResourceWeights
from balancer.placement.base import PlacementChoice, weighted_usage


class LeastLongTermMessageRate:
    """score = +inf when W > T, else long-term msg rate of the broker plus its preallocated bundles.

    Ties at the minimum are broken uniformly at random with the caller's ``rng``; when every
    candidate scores +inf they are all eligible (nobody is better than anybody else).
    """

    name = "LeastLongTermMessageRate"

    def score(
        self, data: BrokerData | None, config: LoadBalancerConfig, w: ResourceWeights | None = None
    ) -> float:
        if data is None:
            # Pulsar would fail on a broker without load data; ranking it last keeps the others usable.
            return math.inf
        if weighted_usage(data.local_data, w or config.weights()) > config.overload_threshold:
            return math.inf
        total = 0.0
        for b in data.preallocated_bundle_data.values():
            total += b.long_term_data.msg_rate_in + b.long_term_data.msg_rate_out
        ta = data.time_average_data
        return total + ta.long_term_msg_rate_in + ta.long_term_msg_rate_out

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
        w = config.weights()
        scores = {b: self.score(load.broker_data.get(b), config, w) for b in candidates}
        least = min(scores.values())
        best = [b for b in candidates if scores[b] == least]
        chosen = best[0] if len(best) == 1 else rng.choice(best)
        all_over = math.isinf(least)
        msg = (
            "every candidate is overloaded or without data; chose at random among all"
            if all_over
            else f"least long-term message rate {least:.6g} msg/s among {len(candidates)} candidates"
        )
        return PlacementChoice(
            chosen,
            explain(
                "all_overloaded" if all_over else "least_long_term_message_rate",
                msg,
                subject=bundle,
                broker=chosen,
                score=least,
                tied=len(best),
                candidates=len(candidates),
                overload_threshold=config.overload_threshold,
            ),
        )

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Stateless: nothing to forget."""
