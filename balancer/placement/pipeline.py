"""``selectBroker`` as Pulsar runs it: policy set, filters with their fallbacks, strategy, overload re-check.

:class:`PipelineCache` holds what the filters derive from the load data and the context, so a
leader cycle that places many bundles computes it once; it is valid while neither changes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from balancer.bundles import heartbeat_broker, namespace_of
from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import BundleData, LoadData
from balancer.placement import filters as f
from balancer.placement.base import PlacementStrategy, weighted_usage
from balancer.placement.context import PlacementContext
from balancer.placement.decision import PlacementDecision
from balancer.placement.round_robin import RoundRobinBrokerSelector
from balancer.placement.survivors import SurvivorInputs, Survivors, survivors

__all__ = ["PipelineCache", "PlacementContext", "PlacementDecision", "assign_bundle", "select_broker"]


class CycleDecision(PlacementDecision):
    """A decision made with a cycle's cache: its filter steps (and a bound destination's
    explanation, and the candidate list) are built on first read from the cache's frozen inputs.
    Plain slots rather than closures: a cycle keeps tens of thousands of these alive."""

    __slots__ = ("_bundle", "_cache", "_namespace", "_recheck", "_survivors")

    def __init__(
        self,
        broker: str | None,
        explanation: Explanation | None,
        cache: PipelineCache,
        namespace: str,
        bundle: str,
        surv: Survivors,
        candidates: list[str] | None = None,
        recheck: Explanation | None = None,
    ) -> None:
        super().__init__(broker, explanation, None, candidates)
        self._cache, self._namespace, self._bundle = cache, namespace, bundle
        self._survivors, self._recheck = surv, recheck

    @property
    def explanation(self) -> Explanation:
        if self._explanation is None:  # only a bound destination is left unexplained
            self._explanation = _bound_explanation(self._bundle, self.broker, len(self._survivors))
        return self._explanation

    @property
    def filter_steps(self) -> list[Explanation]:
        if self._steps is None:
            self._steps = list(self._cache.steps(self._namespace, self._bundle))
            if self._recheck is not None:
                self._steps.append(self._recheck)
        return self._steps

    @property
    def candidates(self) -> list[str]:
        if self._candidates is None:
            self._candidates = self._survivors.as_list()
        return self._candidates


def _bound_explanation(bundle: str, broker: str | None, candidates: int) -> Explanation:
    return explain(
        "bound_destination",
        "the shedder's planned destination is still a candidate",
        subject=bundle,
        broker=broker,
        candidates=candidates,
    )


class PipelineCache:
    """Per-cycle memo of broker-level facts: policy sets, topic counts, range counts, usages, and
    each namespace's filter survivors (fast) and explained filter steps (on demand)."""

    def __init__(self, load: LoadData, config: LoadBalancerConfig, ctx: PlacementContext) -> None:
        self.load, self.config, self.ctx = load, config, ctx
        self.brokers = ctx.brokers(load)
        self._policy: dict[tuple[int, bool], f.Filtered] = {}
        self._policy_of: dict[str, int] = {}
        self._topics: dict[str, int] | None = None
        self._ns_counts: dict[str, dict[str, int]] | None = None
        self._aa_counts: dict[str, dict[str, int]] = {}
        self._usage: dict[str, float] = {}
        self._max_topics: dict[int, tuple[list[str], list[str], Explanation]] = {}
        self._sets: dict[int, tuple[list[str], frozenset[str]]] = {}
        self._other_class: dict[str, LoadData] = {}
        self._other_class_brokers: dict[str, frozenset[str]] = {}
        self._survivors: dict[tuple[str, bool], Survivors] = {}
        self._steps: dict[tuple[str, bool], list[Explanation]] = {}

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

    def other_class_brokers(self, this_class: str) -> frozenset[str]:
        out = self._other_class_brokers.get(this_class)
        if out is None:
            out = frozenset(self.other_class_view(this_class).broker_data)
            self._other_class_brokers[this_class] = out
        return out

    def as_set(self, brokers: list[str]) -> frozenset[str]:
        """``frozenset(brokers)``, memoised per list object (the shared lists are reused per namespace)."""
        hit = self._sets.get(id(brokers))
        if hit is None or hit[0] is not brokers:
            hit = (brokers, frozenset(brokers))  # holding the list keeps its id from being reused
            self._sets[id(brokers)] = hit
        return hit[1]

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

    def max_topics(self, policy: list[str]) -> tuple[list[str], Explanation]:
        # The max-topics filter depends only on the policy set, which is shared by many namespaces.
        hit = self._max_topics.get(id(policy))
        if hit is None or hit[0] is not policy:
            limit = self.config.loadBalancerBrokerMaxTopics
            hit = (policy, *f.max_topics_filter(policy, self.topic_counts(), limit))
            self._max_topics[id(policy)] = hit
        return hit[1], hit[2]

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

    def this_class(self) -> str:
        return self.ctx.this_load_manager_class or self.config.loadManagerClassName

    def survivors(self, namespace: str, bundle: str) -> Survivors:
        """The candidates the filter chain leaves for ``namespace`` (same as the explained chain's)."""
        key = (namespace, bundle in self.ctx.non_persistent_bundles)
        out = self._survivors.get(key)
        if out is None:
            out = survivors(self._survivor_inputs(namespace, bundle))
            self._survivors[key] = out
        return out

    def _survivor_inputs(self, namespace: str, bundle: str) -> SurvivorInputs:
        config, ctx, load = self.config, self.ctx, self.load
        policy, _ = self.policy_set(namespace, bundle)
        group = ctx.anti_affinity_groups.get(namespace)

        def anti_affinity(cands: list[str]) -> list[str]:
            assert group is not None
            counts = self.anti_affinity_counts(group)
            return f.anti_affinity_filter(cands, counts, ctx, config.failureDomainsEnabled)[0]

        def newest_version(cands: list[str]) -> list[str]:
            return f.broker_version_filter(cands, load)[0]

        return SurvivorInputs(
            policy=policy,
            after_max_topics=self.max_topics(policy)[0],
            as_set=self.as_set,
            anti_affinity=anti_affinity if group is not None else None,
            namespace_counts=(
                self.namespace_counts(namespace) if f.even_distribution_applies(namespace, config) else None
            ),
            other_class=self.other_class_brokers(self.this_class()),
            version_filter=newest_version if config.preferLaterVersions else None,
        )

    def steps(self, namespace: str, bundle: str) -> list[Explanation]:
        """Every filter's explained step for ``namespace`` (the reference chain, run once)."""
        key = (namespace, bundle in self.ctx.non_persistent_bundles)
        out = self._steps.get(key)
        if out is None:
            out = _filter_chain(namespace, bundle, self.load, self.config, self.ctx, self)[2]
            self._steps[key] = out
        return out


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
    cands, step = c.max_topics(policy)
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
    this_class = c.this_class()
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
    target) wins when it survives the filters; namespaces excluded from shedding go round-robin.

    With a ``cache`` (a leader cycle) the filter steps are explained when first read, from the
    cache's frozen inputs; without one they are explained at once."""
    c = cache if cache is not None else PipelineCache(load, config, ctx)
    namespace = namespace_of(bundle)
    own = heartbeat_broker(namespace)
    if own is not None:
        live = own in load.broker_data
        return PlacementDecision(
            own if live else None,
            explain(
                "heartbeat_pinned" if live else "heartbeat_broker_down",
                "a heartbeat or SLA-monitor namespace stays on the broker it probes"
                + ("" if live else "; that broker is not live, so nobody takes it"),
                subject=bundle,
                broker=own,
            ),
            [],
            [own] if live else [],
        )
    # Every filter input is fixed for the cache's lifetime, so the survivors depend only on the
    # namespace (and persistence): a cycle that moves thousands of bundles filters once per namespace.
    surv = c.survivors(namespace, bundle)

    def decision(
        broker: str | None,
        why: Explanation | None,
        cands: list[str] | None = None,
        recheck: Explanation | None = None,
    ) -> PlacementDecision:
        if cache is not None:
            return CycleDecision(broker, why, c, namespace, bundle, surv, cands, recheck)
        steps = list(c.steps(namespace, bundle)) + ([recheck] if recheck is not None else [])
        why = why if why is not None else _bound_explanation(bundle, broker, len(surv))
        return PlacementDecision(broker, why, steps, cands if cands is not None else surv.as_list())

    if bound_destination is not None and bound_destination in surv:
        return decision(bound_destination, None)
    policy, cands = surv.policy, surv.as_list()
    bundle_data = load.bundle_data.get(bundle) or BundleData.default()
    excluded = ctx.excluded_namespaces
    if excluded is None:
        excluded = set(config.loadBalancerSheddingExcludedNamespaces)
    if namespace in excluded:
        rr = round_robin if round_robin is not None else ctx.round_robin
        choice = rr.select_broker(cands, bundle, bundle_data, load, config, rng)
    else:
        choice = strategy.select_broker(cands, bundle, bundle_data, load, config, rng)
    if choice.broker is None:
        return decision(None, choice.explanation, cands)
    usage = c.usage(choice.broker)
    if usage is not None and usage > config.overload_threshold:
        again = strategy.select_broker(policy, bundle, bundle_data, load, config, rng)
        recheck = explain(
            "overload_recheck",
            "chosen broker is overloaded; asked the strategy again over the policy set",
            subject=choice.broker,
            usage=usage,
            overload_threshold=config.overload_threshold,
            second_choice=again.broker,
        )
        if again.broker is not None:
            return decision(again.broker, again.explanation, list(policy), recheck)
        return decision(choice.broker, choice.explanation, cands, recheck)
    return decision(choice.broker, choice.explanation, cands)


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
    if sticky is not None and sticky in ctx.cordoned:
        # Preallocated before its broker was cordoned: placed afresh among the others.
        del ctx.preallocated_bundle_to_broker[bundle]
        target = load.broker_data.get(sticky)
        if target is not None:
            target.preallocated_bundle_data.pop(bundle, None)
        sticky = None
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
    ctx.preallocate(load, bundle, broker, data)
    return decision
