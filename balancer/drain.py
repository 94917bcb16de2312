"""What a drain moves next: the bundles a cordoned broker still owns, each with placement's broker.

Pure, like the shedding cycle (:mod:`balancer.cycle`): the leader's drain sequencer
(``service.leader.drain``) decides *when* (one bundle in flight, the next once the previous is
served, or whatever pacer it is handed), this module only *what* and *where*. The drained broker
must be in ``ctx.cordoned``: placement then never picks it, so a drain cannot move a bundle onto
itself or onto another cordoned broker.

Heartbeat and SLA-monitor namespaces stay: Pulsar pins them to the broker they probe (its
lookup would put them straight back) and they leave with the broker when it shuts down.
Namespaces excluded from shedding (``loadBalancerSheddingExcludedNamespaces``) are moved: the
exclusion is from the leader's shedding, and a drain empties the broker; placement puts them
round-robin, as Pulsar places those namespaces.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from balancer.bundles import heartbeat_broker, namespace_of
from balancer.config import LoadBalancerConfig
from balancer.cycle import Move
from balancer.errors import InvalidInput
from balancer.explain import Explanation, explain
from balancer.models import LoadData
from balancer.placement.base import PlacementStrategy
from balancer.placement.context import PlacementContext
from balancer.placement.pipeline import PipelineCache, select_broker

DRAIN_REASON = "drain"


@dataclass
class DrainStep:
    """The next moves of a drain, and what it leaves behind (with why)."""

    moves: list[Move] = field(default_factory=list)
    stays: list[str] = field(default_factory=list)  # heartbeat / SLA-monitor bundles: never moved
    unplaced: list[Explanation] = field(default_factory=list)  # no broker would take them now
    waiting: Explanation | None = None  # bundles with traffic held back (the drain's spacing), with why
    # Bundles of ``moves`` preallocated to their destination in the context (see drain_moves): the
    # caller releases those it does not carry out (PlacementContext.release).
    preallocated: list[str] = field(default_factory=list)


def stays_on_broker(bundle: str) -> bool:
    """A bundle a drain leaves where it is: a heartbeat or SLA-monitor namespace's."""
    return "/" in bundle and heartbeat_broker(namespace_of(bundle)) is not None


def remaining(owned: Iterable[str], idle: Collection[str] = ()) -> list[str]:
    """The bundles of ``owned`` a drain still has to move, in the order it moves them: the ``idle``
    ones (no traffic in the broker's last report) first, since their unload delays no producer and
    needs no spacing, then the others by name."""
    quiet = set(idle)
    return sorted((b for b in owned if not stays_on_broker(b)), key=lambda b: (b not in quiet, b))


def drain_moves(
    broker: str,
    owned: Iterable[str],
    load: LoadData,
    config: LoadBalancerConfig,
    placement: PlacementStrategy,
    ctx: PlacementContext,
    rng: random.Random,
    *,
    limit: int = 1,
    skip: Collection[str] = (),
    idle: Collection[str] = (),
    hold: Explanation | None = None,
    preallocate: bool = True,
) -> DrainStep:
    """Up to ``limit`` moves off ``broker`` (cordoned in ``ctx``) of the bundles it ``owned``,
    leaving out ``skip`` (bundles in flight or given up on); each to placement's choice. ``idle``
    bundles go first (:func:`remaining`); while ``hold`` says why (the spacing between two unloads
    whose clients reconnect), only idle ones move and ``waiting`` carries ``hold``.

    With ``preallocate`` each move's bundle is preallocated to its destination in ``ctx`` and
    ``load`` (Pulsar's ``selectBrokerForAssignment``), so the next placement, in this call or in a
    later one, counts it there until the destination reports it: a drain moves one bundle per tick,
    faster than reports follow (Extensible brokers' CPU lags ~60 s), and without it every bundle
    went to the broker that looked least loaded when the drain began (4 of 4 on real brokers). The
    caller releases the preallocation of a move it does not carry out (``step.preallocated``).
    Bundles no report lists are not preallocated: they carry no load to count, and no report would
    end their preallocation.

    Raises InvalidInput when ``broker`` is not cordoned in ``ctx``: placement could pick it."""
    if broker not in ctx.cordoned:
        raise InvalidInput("broker", broker, "a drained broker must be cordoned first")
    if limit < 1:
        raise InvalidInput("limit", limit, "at least one move")
    step = DrainStep()
    owned = list(owned)
    step.stays = sorted(b for b in owned if stays_on_broker(b))
    cache = PipelineCache(load, config, ctx)
    quiet = set(idle)
    for bundle in remaining(owned, quiet):
        if bundle in skip:
            continue
        if hold is not None and bundle not in quiet:
            step.waiting = hold
            break
        decision = select_broker(bundle, load, config, placement, ctx, rng, cache=cache)
        dest = decision.broker
        if dest is None or dest == broker or dest in ctx.cordoned:
            step.unplaced.append(
                explain(
                    "drain_no_destination",
                    "placement found no broker outside the cordoned ones",
                    subject=bundle,
                    source=broker,
                    placement=str(decision.explanation),
                )
            )
            continue
        placed = decision.explanation
        data = load.bundle_data.get(bundle)
        if preallocate and data is not None:
            ctx.preallocate(load, bundle, dest, data)
            step.preallocated.append(bundle)
        why = explain(
            DRAIN_REASON,
            f"drain of {broker}: moved to {dest} ({placed.message})",
            subject=bundle,
            source=broker,
            destination=dest,
            placement=placed.reason,
            candidates=len(decision.candidates),
            idle=bundle in quiet,
        )
        step.moves.append(Move(bundle, broker, dest, why))
        if len(step.moves) >= limit:
            break
        if preallocate and bundle in step.preallocated:
            # The cache's topic and range counts predate the preallocation.
            cache = PipelineCache(load, config, ctx)
    return step


def intruders(kept: frozenset[str] | None, owned: Iterable[str]) -> tuple[frozenset[str], list[str]]:
    """Pulsar mode: the bundles a cordoned broker gained since it was cordoned (Pulsar's own
    placement on lookup cannot be vetoed), and what it keeps from now on.

    ``kept``: what it owned when first seen cordoned (None: first sight, all of ``owned`` is kept).
    A kept bundle that left is forgotten, so one that comes back later counts as gained. Heartbeat
    and SLA-monitor bundles are never intruders."""
    now = frozenset(owned)
    if kept is None:
        return now, []
    gained = sorted(b for b in now - kept if not stays_on_broker(b))
    return kept & now, gained
