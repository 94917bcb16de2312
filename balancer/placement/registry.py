"""Placement strategy by Pulsar class name or short name."""

from __future__ import annotations

from balancer.errors import InvalidInput
from balancer.placement.base import PlacementStrategy
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from balancer.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from balancer.placement.round_robin import RoundRobinBrokerSelector

_IMPL = "org.apache.pulsar.broker.loadbalance.impl."
_FACTORIES: dict[
    str, type[LeastLongTermMessageRate | LeastResourceUsageWithWeight | RoundRobinBrokerSelector]
] = {
    "LeastLongTermMessageRate": LeastLongTermMessageRate,
    "LeastResourceUsageWithWeight": LeastResourceUsageWithWeight,
    "RoundRobinBrokerSelector": RoundRobinBrokerSelector,
}
AVG_SHEDDER = "AvgShedder"
BALANCED_SHEDDER = "BalancedShedder"  # loadmgr's default (issue 7): one object in both roles too


def short_name(name: str) -> str:
    return name.strip().rsplit(".", 1)[-1]


def placement_names() -> list[str]:
    return [*_FACTORIES, AVG_SHEDDER, BALANCED_SHEDDER]


def create_placement(name: str, shedder: object | None = None) -> PlacementStrategy:
    """A fresh strategy; ``AvgShedder`` is the shedder instance itself (one object, both roles),
    so Pulsar's rule applies: the shedding strategy must then be an AvgShedder too."""
    short = short_name(name)
    if short == AVG_SHEDDER:
        if shedder is None or type(shedder).__name__ != AVG_SHEDDER or not hasattr(shedder, "select_broker"):
            raise InvalidInput(
                "loadBalancerLoadPlacementStrategy",
                name,
                "AvgShedder placement needs the AvgShedder shedding strategy instance",
            )
        if not isinstance(shedder, PlacementStrategy):
            raise InvalidInput(
                "loadBalancerLoadPlacementStrategy", name, "shedder lacks the placement methods"
            )
        return shedder
    if short == BALANCED_SHEDDER:
        if type(shedder).__name__ != BALANCED_SHEDDER or not isinstance(shedder, PlacementStrategy):
            raise InvalidInput(
                "loadBalancerLoadPlacementStrategy",
                name,
                "BalancedShedder placement needs the BalancedShedder shedding strategy instance",
            )
        return shedder
    factory = _FACTORIES.get(short)
    if factory is None or (name.count(".") and not name.startswith(_IMPL) and short != name):
        raise InvalidInput(
            "loadBalancerLoadPlacementStrategy",
            name,
            f"unknown placement strategy; known: {placement_names()}",
        )
    return factory()
