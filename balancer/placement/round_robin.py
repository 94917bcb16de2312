"""Pulsar's RoundRobinBrokerSelector, used for namespaces excluded from shedding."""

from __future__ import annotations

import random
from collections.abc import Sequence

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.javamath import INT_MAX
from balancer.models import BundleData, LoadData
from balancer.placement.base import PlacementChoice


class RoundRobinBrokerSelector:
    """A counter over a cached candidate list, refreshed when the candidates no longer match it."""

    name = "RoundRobinBrokerSelector"

    def __init__(self) -> None:
        self.counter = 0
        self.cached: list[str] = []

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
            # An empty call does not advance the counter (Pulsar returns before touching it).
            return PlacementChoice(None, explain("no_candidates", "no candidate broker", subject=bundle))
        index = self.counter % len(candidates)
        if (
            len(self.cached) != len(candidates)
            or index >= len(self.cached)
            or self.cached[index] not in candidates
        ):
            self.cached = list(candidates)
        chosen = self.cached[index]
        counter = self.counter
        self.counter = 0 if self.counter == INT_MAX else self.counter + 1
        return PlacementChoice(
            chosen,
            explain(
                "round_robin",
                f"round-robin position {index} of {len(candidates)}",
                subject=bundle,
                broker=chosen,
                counter=counter,
                index=index,
                candidates=len(candidates),
            ),
        )

    def on_active_brokers_change(self, active: set[str]) -> None:
        self.cached = [b for b in self.cached if b in active]
