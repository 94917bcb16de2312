"""``selectBroker`` as Pulsar runs it: policy set, filters with their fallbacks, strategy, overload re-check.

:class:`PipelineCache` holds what the filters derive from the load data and the context, so a
leader cycle that places many bundles computes it once; it is valid while neither changes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import BundleData, LoadData
from balancer.placement import filters as f
from balancer.placement.base import PlacementStrategy, weighted_usage
from balancer.placement.context import PlacementContext
from balancer.placement.round_robin import RoundRobinBrokerSelector

__all__ = ["PipelineCache", "PlacementContext", "PlacementDecision", "assign_bundle", "select_broker"]


@dataclass
class PlacementDecision:
    """The chosen broker (None: nobody), the final reason, and every filter's step in order."""

    broker: str | None
    explanation: Explanation
    filter_steps: list[Explanation] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)


class PipelineCache:
    """Per-cycle memo of broker-level facts: policy sets, topic counts, range counts, usages."""

    def __init__(self, load: LoadData, config: LoadBalancerConfig, ctx: PlacementContext) -> None:
        self.load, self.config, self.ctx = load, config, ctx
        self.brokers = ctx.brokers(load)
        self._policy: dict[tuple[int, bool], f.Filtered] = {}
        self._policy_of: dict[str, int] = {}
        self._topics: dict[str, int] | None = None
        self._ns_counts: dict[str, dict[str, int]] | None = None
        self._aa_counts: dict[str, dict[str, int]] = {}
        self._usage: dict[str, float] = {}
        self.filtered: dict[tuple[str, bool], tuple[list[str], list[str], list[Explanation]]] = {}
        self.filtered_sets: dict[tuple[str, bool], frozenset[str]] = {}
        self.max_topics_memo: dict[int, tuple[list[str], list[str], Explanation]] = {}
        self._other_class: dict[str, LoadData] = {}

    def other_class_view(self, this_class: str) -> LoadData:
        """Load data restricted to the brokers whose load manager class is not ``this_class``."""
        view = self._other_class.get(this_class)
        if view is None:
            view = LoadData.model_construct(
                broker_data={
                    b: d
                    for b, d in self.load.broker_data.items()
                    if d.local_data.load_manager_class_name != this_class
                },
                bundle_data={},
                recently_unloaded_bundles={},
            )
            self._other_class[this_class] = view
        return view

    def policy_set(self, namespace: str, bundle: str) -> f.Filtered:
        # P depends on the namespace only through the isolation policy that applies to it.
        if namespace not in self._policy_of:
            self._policy_of[namespace] = next(
                (i for i, p in enumerate(self.ctx.isolation_policies) if p.applies_to(namespace)), -1
            )
        key = (self._policy_of[namespace], bundle in self.ctx.non_persistent_bundles)
        if key not in self._policy:
            self._policy[key] = f.namespace_policy_candidates(
                namespace, bundle, self.brokers, self.load, self.ctx
            )
        return self._policy[key]

    def topic_counts(self) -> dict[str, int]:
        if self._topics is None:
            self._topics = f.broker_topic_counts(self.load, self.brokers)
        return self._topics

    def namespace_counts(self, namespace: str) -> Mapping[str, int]:
        if self._ns_counts is None:
            inverted: dict[str, dict[str, int]] = {}
            for broker, per_ns in self.ctx.bundle_ranges.items():
                for ns, ranges in per_ns.items():
                    if ranges:
                        inverted.setdefault(ns, {})[broker] = len(ranges)
            self._ns_counts = inverted
        return self._ns_counts.get(namespace, {})

    def anti_affinity_counts(self, group: str) -> dict[str, int]:
        if group not in self._aa_counts:
            self._aa_counts[group] = f.anti_affinity_counts(self.ctx, group)
        return self._aa_counts[group]

    def usage(self, broker: str) -> float | None:
        if broker not in self._usage:
            data = self.load.broker_data.get(broker)
            if data is None:
                return None
            self._usage[broker] = weighted_usage(data.local_data, self.config.weights())
        return self._usage[broker]


def _restored(name: str, why: str, policy: list[str], **nums: Any) -> Explanation:
    return explain(name, why, restored_to=len(policy), **nums)


def _filter_chain(
    namespace: str,
    bundle: str,
    load: LoadData,
    config: LoadBalancerConfig,
    ctx: PlacementContext,
    c: PipelineCache,
) -> tuple[list[str], list[str], list[Explanation]]:
    """Policy set, then the filters with their fallbacks: (policy set, candidates, steps)."""
    policy, step = c.policy_set(namespace, bundle)
    steps = [step]
    # The max-topics filter depends only on the policy set, which is shared by many namespaces.
    topics = c.max_topics_memo.get(id(policy))
    if topics is None or topics[0] is not policy:
        topics = (policy, *f.max_topics_filter(policy, c.topic_counts(), config.loadBalancerBrokerMaxTopics))
        c.max_topics_memo[id(policy)] = topics
    cands, step = topics[1], topics[2]
    steps.append(step)
    group = ctx.anti_affinity_groups.get(namespace)
    if group is not None:
        cands, step = f.anti_affinity_filter(
            cands, c.anti_affinity_counts(group), ctx, config.failureDomainsEnabled
        )
        steps.append(step)
    if f.even_distribution_applies(namespace, config):
        cands, step = f.even_distribution_filter(cands, c.namespace_counts(namespace))
        steps.append(step)
    this_class = ctx.this_load_manager_class or config.loadManagerClassName
    try:
        # Same result as filtering on the full load data: brokers absent from the view are kept,
        # and the view holds exactly the brokers that run another class (built once per cycle).
        cands, step = f.load_manager_class_filter(cands, c.other_class_view(this_class), this_class)
        steps.append(step)
        if config.preferLaterVersions:
            cands, step, _ = f.broker_version_filter(cands, load)
            steps.append(step)
    except f.FilterAborted as e:
        cands = list(policy)
        steps.append(_restored("filter_aborted", f"{e}; candidates restored to the policy set", policy))
    if not cands:
        cands = list(policy)
        steps.append(
            _restored("no_candidates_left", "filters left nobody; restored to the policy set", policy)
        )
    return list(policy), cands, steps


def select_broker(
    bundle: str,
    load: LoadData,
    config: LoadBalancerConfig,
    strategy: PlacementStrategy,
    ctx: PlacementContext,
    rng: random.Random,
    *,
    cache: PipelineCache | None = None,
    bound_destination: str | None = None,
    round_robin: RoundRobinBrokerSelector | None = None,
) -> PlacementDecision:
    """Pick a broker for ``bundle`` (no preallocation). ``bound_destination`` (a shedder's planned
    target) wins when it survives the filters; namespaces excluded from shedding go round-robin."""
    c = cache if cache is not None else PipelineCache(load, config, ctx)
    namespace = namespace_of(bundle)
    bundle_data = load.bundle_data.get(bundle) or BundleData.default()
    # Every filter input is fixed for the cache's lifetime, so the filtered set depends only on
    # the namespace (and persistence): computing it once per namespace keeps a cycle that moves
    # thousands of bundles from re-filtering 1,000 brokers per bundle (issue 7's cycle speed).
    key = (namespace, bundle in ctx.non_persistent_bundles)
    memo = c.filtered.get(key)
    if memo is None:
        memo = _filter_chain(namespace, bundle, load, config, ctx, c)
        c.filtered[key] = memo
        c.filtered_sets[key] = frozenset(memo[1])
    policy, cands, steps = memo[0], memo[1], list(memo[2])

    if bound_destination is not None and bound_destination in c.filtered_sets[key]:
        return PlacementDecision(
            bound_destination,
            explain(
                "bound_destination",
                "the shedder's planned destination is still a candidate",
                subject=bundle,
                broker=bound_destination,
                candidates=len(cands),
            ),
            steps,
            cands,
        )
    excluded = ctx.excluded_namespaces
    if excluded is None:
        excluded = set(config.loadBalancerSheddingExcludedNamespaces)
    if namespace in excluded:
        rr = round_robin if round_robin is not None else ctx.round_robin
        choice = rr.select_broker(cands, bundle, bundle_data, load, config, rng)
    else:
        choice = strategy.select_broker(cands, bundle, bundle_data, load, config, rng)
    if choice.broker is None:
        return PlacementDecision(None, choice.explanation, steps, cands)
    usage = c.usage(choice.broker)
    if usage is not None and usage > config.overload_threshold:
        again = strategy.select_broker(policy, bundle, bundle_data, load, config, rng)
        steps.append(
            explain(
                "overload_recheck",
                "chosen broker is overloaded; asked the strategy again over the policy set",
                subject=choice.broker,
                usage=usage,
                overload_threshold=config.overload_threshold,
                second_choice=again.broker,
            )
        )
        if again.broker is not None:
            return PlacementDecision(again.broker, again.explanation, steps, list(policy))
    return PlacementDecision(choice.broker, choice.explanation, steps, cands)


def assign_bundle(
    bundle: str,
    load: LoadData,
    config: LoadBalancerConfig,
    strategy: PlacementStrategy,
    ctx: PlacementContext,
    rng: random.Random,
    *,
    stored_bundle_data: BundleData | None = None,
    round_robin: RoundRobinBrokerSelector | None = None,
) -> PlacementDecision:
    """``selectBrokerForAssignment``: a preallocated bundle sticks to its broker; otherwise select
    and preallocate (bundle data into the broker's preallocated map, range into the cache)."""
    sticky = ctx.preallocated_bundle_to_broker.get(bundle)
    if sticky is not None:
        return PlacementDecision(
            sticky,
            explain(
                "preallocated", "bundle already preallocated to this broker", subject=bundle, broker=sticky
            ),
        )
    # Pulsar seeds the bundle's data (computeIfAbsent) before selecting, so the strategy sees the
    # bundle's stored history rather than the default 50 msg/s.
    data = load.bundle_data.get(bundle)
    if data is None:
        data = (
            stored_bundle_data.model_copy(deep=True)
            if stored_bundle_data is not None
            else BundleData.default()
        )
        load.bundle_data[bundle] = data
    decision = select_broker(bundle, load, config, strategy, ctx, rng, round_robin=round_robin)
    broker = decision.broker
    if broker is None:
        return decision
    target = load.broker_data.get(broker)
    if target is not None:
        target.preallocated_bundle_data[bundle] = data
    ctx.preallocated_bundle_to_broker[bundle] = broker
    ctx.add_range(broker, bundle)
    return decision
