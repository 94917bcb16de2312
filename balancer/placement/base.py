"""The placement contract: a strategy picks one broker among candidates and says why."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, runtime_checkable

from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.javamath import percent_usage
from balancer.models import BundleData, LoadData, LocalBrokerData, ResourceWeights


@dataclass(frozen=True)
class PlacementChoice:
    """A strategy's answer: the broker (None when nobody fits) and the reasoning with its numbers."""

    broker: str | None
    explanation: Explanation


@runtime_checkable
class PlacementStrategy(Protocol):
    name: str

    def select_broker(
        self,
        candidates: Sequence[str],
        bundle: str,
        bundle_data: BundleData,
        load: LoadData,
        config: LoadBalancerConfig,
        rng: random.Random,
    ) -> PlacementChoice: ...

    def on_active_brokers_change(self, active: set[str]) -> None: ...


@runtime_checkable
class OrdersBatch(Protocol):
    """Optional: a strategy that wants a batch of unowned bundles (a dead broker's, placed in one
    pass) handed to it in its own order. Placement still sees one bundle at a time, but under
    Pulsar's even-distribution filter the order decides which brokers are left for each bundle."""

    def order_batch(
        self, bundles: Sequence[str], load: LoadData, stored: Mapping[str, BundleData]
    ) -> list[str]: ...


def batch_order(
    strategy: PlacementStrategy,
    bundles: Sequence[str],
    load: LoadData,
    stored: Mapping[str, BundleData],
) -> list[str]:
    """``bundles`` in the order ``strategy`` places them: its own if it orders batches, else as
    given (Pulsar places each bundle when a client looks it up, in no order of its choosing)."""
    if isinstance(strategy, OrdersBatch):
        return strategy.order_batch(bundles, load, stored)
    return list(bundles)


@lru_cache(maxsize=1 << 16)
def _weighted(
    cpu_u: float,
    cpu_l: float,
    dm_u: float,
    dm_l: float,
    in_u: float,
    in_l: float,
    out_u: float,
    out_l: float,
    w_cpu: float,
    w_dm: float,
    w_in: float,
    w_out: float,
) -> float:
    # Pure function of the numbers, so memoising it is safe across cycles and mutations;
    # a placement pass asks for the same broker's usage once per moved bundle.
    best = max(
        percent_usage(cpu_u, cpu_l) * w_cpu,
        percent_usage(dm_u, dm_l) * w_dm,
        percent_usage(in_u, in_l) * w_in,
        percent_usage(out_u, out_l) * w_out,
    )
    return best / 100.0


def weighted_usage(local: LocalBrokerData, w: ResourceWeights) -> float:
    """W(broker): Pulsar's weighted max of cpu, direct memory and NIC in/out, as a fraction.

    Heap memory is not part of W (Pulsar since 3.0), whatever its weight.
    """
    c, d, i, o = local.cpu, local.direct_memory, local.bandwidth_in, local.bandwidth_out
    return _weighted(
        c.usage,
        c.limit,
        d.usage,
        d.limit,
        i.usage,
        i.limit,
        o.usage,
        o.limit,
        w.cpu,
        w.direct_memory,
        w.bandwidth_in,
        w.bandwidth_out,
    )


def planned_or_none_left(
    plans: Mapping[str, str], bundle: str, candidates: Sequence[str]
) -> PlacementChoice | None:
    """The prologue of every strategy that binds destinations when shedding (AvgShedder, ours): the
    planned broker if it is still a candidate, an empty choice if nobody is; otherwise ``None`` and the
    strategy picks by its own rule."""
    planned = plans.get(bundle)
    if planned is not None and planned in candidates:
        return PlacementChoice(
            planned,
            explain(
                "planned_destination",
                "destination bound when the bundle was shed",
                subject=bundle,
                broker=planned,
            ),
        )
    if not candidates:
        return PlacementChoice(None, explain("no_candidates", "no candidate broker", subject=bundle))
    return None
