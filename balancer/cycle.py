"""One leader shedding cycle: what to unload, and where each bundle goes.

The live leader and the simulator both call :func:`plan_shedding_cycle`. It mirrors Pulsar's
``doLoadShedding``: the strategy proposes (broker, bundle) pairs; a bundle of an excluded
namespace, one no other broker may host, or one anti-affinity pins is skipped; the destination is
the strategy's bound one when it survives the filters, else the placement pipeline's choice
(without preallocation); no destination or the source itself means no move.
"""

from __future__ import annotations

import random
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import LoadData
from balancer.placement.base import PlacementStrategy
from balancer.placement.context import PlacementContext
from balancer.placement.filters import anti_affinity_allows_unload
from balancer.placement.pipeline import PipelineCache, PlacementDecision, select_broker
from balancer.shedding.base import LoadSheddingStrategy, SheddingResult
from balancer.shedding.leader_rules import shed


class Move:
    """One planned unload: ``Move(bundle, source, destination, explanation)``.

    The cycle leaves the explanation to be built on first read from the shedder's reason and the
    placement decision: a cycle plans tens of thousands of moves and the simulator reads none.
    """

    __slots__ = ("_decision", "_explanation", "_numbers", "_shed_why", "bundle", "destination", "source")

    def __init__(self, bundle: str, source: str, destination: str, explanation: Explanation) -> None:
        self.bundle, self.source, self.destination = bundle, source, destination
        self._explanation: Explanation | None = explanation
        self._shed_why: Explanation | None = None
        self._numbers: dict[str, Any] = {}
        self._decision: PlacementDecision | None = None

    @classmethod
    def planned(
        cls, bundle: str, source: str, dest: str, shed_why: Explanation | None, decision: PlacementDecision
    ) -> Move:
        move = cls.__new__(cls)
        move.bundle, move.source, move.destination = bundle, source, dest
        move._explanation, move._shed_why, move._decision = None, shed_why, decision
        # The shedder's numbers as they are now, whenever the explanation is read.
        move._numbers = dict(shed_why.numbers) if shed_why is not None else {}
        return move

    @property
    def explanation(self) -> Explanation:
        got = self._explanation
        if got is None:
            # Read from two threads at once (the cycle's, a REST read of /decisions): the one that
            # finds the decision already taken finds the explanation already set.
            decision, shed_why = self._decision, self._shed_why
            if decision is None:
                assert self._explanation is not None
                return self._explanation
            got = _move_explanation(
                self.bundle, self.source, self.destination, shed_why, self._numbers, decision
            )
            self._explanation = got
            self._decision = self._shed_why = None
        return got

    @property
    def reason(self) -> str:
        """The explanation's reason code, without building the explanation (the assignment written
        and the history row need only this; the whole explanation is built when it is read)."""
        if self._explanation is not None:
            return self._explanation.reason
        return self._shed_why.reason if self._shed_why is not None else "unload"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Move):
            return NotImplemented
        return (self.bundle, self.source, self.destination, self.explanation) == (
            other.bundle,
            other.source,
            other.destination,
            other.explanation,
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[Move], tuple[str, str, str, Explanation]]:
        return Move, (self.bundle, self.source, self.destination, self.explanation)

    def __repr__(self) -> str:
        return f"Move({self.bundle!r}, {self.source!r}, {self.destination!r}, {self.explanation!r})"


@dataclass
class CyclePlan:
    moves: list[Move]
    shedding: SheddingResult
    skipped: list[Explanation] = field(default_factory=list)


def plan_shedding_cycle(
    load: LoadData,
    config: LoadBalancerConfig,
    shedder: LoadSheddingStrategy,
    placement: PlacementStrategy,
    ctx: PlacementContext,
    now_ms: int,
    rng: random.Random,
) -> CyclePlan:
    """Plan one cycle; records ``recently_unloaded_bundles[bundle] = now_ms`` for every move."""
    result = shed(load, config, shedder, now_ms)
    plan = CyclePlan([], result)
    if result.count == 0:
        return plan
    with _placement_scope(placement, load, config):
        _place(plan, load, config, placement, ctx, now_ms, rng)
    return plan


def _placement_scope(
    placement: PlacementStrategy, load: LoadData, config: LoadBalancerConfig
) -> AbstractContextManager[Any]:
    """The strategy's per-cycle scope when it has one (broker data is fixed until the cycle ends)."""
    scope = getattr(placement, "cycle_scope", None)
    return nullcontext() if scope is None else scope(load, config)


def _place(
    plan: CyclePlan,
    load: LoadData,
    config: LoadBalancerConfig,
    placement: PlacementStrategy,
    ctx: PlacementContext,
    now_ms: int,
    rng: random.Random,
) -> None:
    result = plan.shedding
    cache = PipelineCache(load, config, ctx)
    why_unloaded = {d.subject: d for d in result.decisions if d.subject}
    excluded = ctx.excluded_namespaces
    if excluded is None:
        excluded = set(config.loadBalancerSheddingExcludedNamespaces)
    for source, bundle in result.bundles():
        ns = namespace_of(bundle)
        if ns in excluded:
            plan.skipped.append(
                explain("excluded_namespace", "namespace excluded from shedding", subject=bundle)
            )
            continue
        policy, _ = cache.policy_set(ns, bundle)
        if not any(b != source for b in policy):
            plan.skipped.append(
                explain(
                    "no_other_broker",
                    "no other broker satisfies the namespace policies",
                    subject=bundle,
                    source=source,
                    policy_brokers=len(policy),
                )
            )
            continue
        group = ctx.anti_affinity_groups.get(ns)
        if group is not None:
            blocked = anti_affinity_allows_unload(source, policy, cache.anti_affinity_counts(group))
            if blocked is not None:
                blocked.subject = bundle
                plan.skipped.append(blocked)
                continue
        decision = select_broker(
            bundle,
            load,
            config,
            placement,
            ctx,
            rng,
            cache=cache,
            bound_destination=result.destinations.get(bundle),
        )
        dest = decision.broker
        if dest is None or dest == source:
            plan.skipped.append(
                explain(
                    "no_destination" if dest is None else "destination_is_source",
                    "placement found no broker" if dest is None else "placement chose the current owner",
                    subject=bundle,
                    source=source,
                    placement=str(decision.explanation),
                )
            )
            continue
        plan.moves.append(Move.planned(bundle, source, dest, why_unloaded.get(bundle), decision))
        load.recently_unloaded_bundles[bundle] = now_ms


def _move_explanation(
    bundle: str,
    source: str,
    dest: str,
    shed_why: Explanation | None,
    numbers: dict[str, Any],
    decision: PlacementDecision,
) -> Explanation:
    """The shedder's reason for unloading plus the placement's reason for the destination."""
    placed = decision.explanation
    numbers.update(source=source, destination=dest, placement=placed.reason, placement_numbers=placed.numbers)
    return Explanation(
        reason=shed_why.reason if shed_why is not None else "unload",
        message=(shed_why.message if shed_why is not None else "unloaded by the shedder")
        + f"; placed on {dest}: {placed.message}",
        numbers=numbers,
        subject=bundle,
    )
