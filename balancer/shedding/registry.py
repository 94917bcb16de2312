"""Shedding strategies by name: Pulsar's class name or the short name both select one."""

from __future__ import annotations

from collections.abc import Callable

from balancer.errors import InvalidInput
from balancer.shedding.avg import AvgShedder
from balancer.shedding.balanced import BalancedShedder
from balancer.shedding.base import LoadSheddingStrategy
from balancer.shedding.overload import OverloadShedder
from balancer.shedding.threshold import ThresholdShedder
from balancer.shedding.uniform import UniformLoadShedder

PULSAR_PACKAGE = "org.apache.pulsar.broker.loadbalance.impl."

SHEDDERS: dict[str, Callable[[], LoadSheddingStrategy]] = {
    "OverloadShedder": OverloadShedder,
    "ThresholdShedder": ThresholdShedder,
    "UniformLoadShedder": UniformLoadShedder,
    "AvgShedder": AvgShedder,
    "BalancedShedder": BalancedShedder,  # loadmgr's default (issue 7), not a Pulsar class
}


def register_shedder(short_name: str, factory: Callable[[], LoadSheddingStrategy]) -> None:
    """Make a strategy of our own selectable by name, next to Pulsar's."""
    SHEDDERS[short_name] = factory


def short_name(name: str) -> str:
    """``org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder`` -> ``ThresholdShedder``."""
    return name.strip().rsplit(".", 1)[-1]


def create_shedder(name: str) -> LoadSheddingStrategy:
    """A fresh instance (strategies with state must not be shared between leaders or tests)."""
    key = short_name(name)
    if "." in name.strip() and not name.strip().startswith(PULSAR_PACKAGE) and key in SHEDDERS:
        # A class of another package with a familiar simple name is not Pulsar's strategy.
        raise InvalidInput(
            "loadBalancerLoadSheddingStrategy", name, f"expected {PULSAR_PACKAGE}{key} or {key}"
        )
    factory = SHEDDERS.get(key)
    if factory is None:
        known = ", ".join(sorted(SHEDDERS))
        raise InvalidInput(
            "loadBalancerLoadSheddingStrategy", name, f"unknown shedding strategy; known: {known}"
        )
    return factory()
