"""What every shedding strategy returns, and the protocol the leader codes against."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, Field

from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import LoadData


class SheddingResult(BaseModel):
    """Bundles to unload per broker, in selection order, with the reasons behind every choice.

    ``destinations`` holds a bound destination only where the strategy itself picks one
    (AvgShedder pairs each overloaded broker with an underloaded one); otherwise placement decides.
    """

    unloads: dict[str, list[str]] = Field(default_factory=dict)
    destinations: dict[str, str] = Field(default_factory=dict)
    decisions: list[Explanation] = Field(default_factory=list)
    brokers: dict[str, Explanation] = Field(default_factory=dict)
    summary: Explanation = Field(default_factory=lambda: explain("empty", "nothing to unload"))

    def bundles(self) -> list[tuple[str, str]]:
        """Every (broker, bundle) to unload, broker by broker in selection order."""
        return [(broker, b) for broker, bundles in self.unloads.items() for b in bundles]

    @property
    def count(self) -> int:
        return sum(len(b) for b in self.unloads.values())


class LoadSheddingStrategy(Protocol):
    """Pulsar's ``LoadSheddingStrategy``: pick bundles to unload from the leader's view."""

    name: str

    def find_bundles_for_unloading(self, load: LoadData, config: LoadBalancerConfig) -> SheddingResult:
        """Decide what to unload; must not mutate ``load``."""
        ...

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Forget state kept for brokers that are no longer in ``active``."""
        ...
