"""Handlers of ``placement`` vectors about namespace policies: anti-affinity and isolation in a cycle.

``filterAntiAffinityGroupOwnedBrokers`` and ``shouldAntiAffinityNamespaceUnload`` replay
``AntiAffinityNamespaceGroupTest``'s steps on the pure filters; ``doLoadShedding`` runs one whole
leader cycle (shedder, anti-affinity unload rule, placement pipeline) on a small cluster whose
namespaces carry isolation policies, anti-affinity groups and failure domains.
"""

from __future__ import annotations

import random
from typing import Any

from balancer.cycle import plan_shedding_cycle
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData, TimeAverageBrokerData
from balancer.placement import filters as f
from balancer.placement.context import IsolationPolicy, PlacementContext
from balancer.placement.registry import create_placement
from balancer.shedding.registry import create_shedder
from balancer.split.unload import split_unload
from balancer.vectors.kinds_common import Case, expect, run_cases, vector_config
from balancer.vectors.report import RoundReport


def _context(inp: dict[str, Any], ranges: dict[str, dict[str, list[str]]]) -> PlacementContext:
    """A context holding the vector's groups, domains (domain -> brokers) and broker -> ns -> ranges."""
    ctx = PlacementContext(anti_affinity_groups=dict(inp.get("anti_affinity_groups") or {}))
    for domain, brokers in (inp.get("failure_domains") or {}).items():
        for b in brokers:
            ctx.failure_domains[b] = domain
    for broker, per_ns in ranges.items():
        for ns, rngs in per_ns.items():
            for rng in rngs:
                ctx.add_range(broker, f"{ns}/{rng}")
    return ctx


def handle_anti_affinity_filter(name: str, data: dict[str, Any]) -> list[RoundReport]:
    """Each step: the ranges cache as the test left it, the candidates, the survivors expected."""
    config = vector_config(data.get("config"))
    inp = data["input"]
    cases: list[tuple[str, Case]] = []
    for i, step in enumerate(inp["steps"]):

        def case(step: dict[str, Any] = step) -> list[str]:
            ctx = _context(inp, step["ranges"])
            group = ctx.anti_affinity_groups[step["namespace"]]
            counts = f.anti_affinity_counts(ctx, group)
            out, _ = f.anti_affinity_filter(step["candidates"], counts, ctx, config.failureDomainsEnabled)
            return expect("candidates", sorted(step["expected"]), sorted(out))

        cases.append((f"step {i} {step['namespace']}", case))
    return run_cases(name, cases)


def handle_anti_affinity_unload(name: str, data: dict[str, Any]) -> list[RoundReport]:
    """Each case: ranges cache, the policy's candidate brokers, the source; may it unload?"""
    inp = data["input"]
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(inp["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            ctx = _context(inp, c["ranges"])
            counts = f.anti_affinity_counts(ctx, ctx.anti_affinity_groups[inp["namespace"]])
            blocked = f.anti_affinity_allows_unload(c["source"], c["candidates"], counts)
            return expect("should unload", c["expected_should_unload"], blocked is None)

        cases.append((f"case {i}: {c.get('label', '')}".rstrip(": "), case))
    return run_cases(name, cases)


def _cycle_load(spec: dict[str, Any]) -> LoadData:
    """Brokers as Pulsar writes LocalBrokerData (``lastStats`` included), plus an optional
    ``timeAverage`` (TimeAverageBrokerData's JSON); each bundle's data is seeded from its stats."""
    load = LoadData()
    for broker, b in spec.items():
        local = LocalBrokerData.model_validate({k: v for k, v in b.items() if k != "timeAverage"})
        data = BrokerData(local_data=local)
        if b.get("timeAverage"):
            data.time_average_data = TimeAverageBrokerData.model_validate(b["timeAverage"])
        load.broker_data[broker] = data
        for bundle, s in local.last_stats.items():
            bd = BundleData.default()
            for window in (bd.short_term_data, bd.long_term_data):
                window.msg_throughput_in = s.msg_throughput_in
                window.msg_throughput_out = s.msg_throughput_out
                window.msg_rate_in = s.msg_rate_in
                window.msg_rate_out = s.msg_rate_out
            load.bundle_data[bundle] = bd
    return load


def handle_shedding_cycle(name: str, data: dict[str, Any]) -> list[RoundReport]:
    """One cycle per case: which bundles move where, and which are skipped for which reason."""
    config = vector_config(data.get("config"))
    inp = data["input"]
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(inp["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            load = _cycle_load(c["brokers"])
            policies = [
                IsolationPolicy.from_pulsar(n, p) for n, p in (inp.get("isolation_policies") or {}).items()
            ]
            ctx = PlacementContext.from_load(
                load,
                isolation_policies=policies,
                anti_affinity_groups=dict(inp.get("anti_affinity_groups") or {}),
            )
            for domain, brokers in (inp.get("failure_domains") or {}).items():
                for b in brokers:
                    ctx.failure_domains[b] = domain
            # loadmgr's own: cordoned brokers (docs/drain.md) are never a destination.
            ctx.cordoned = frozenset(c.get("cordoned") or ())
            shedder = create_shedder(config.loadBalancerLoadSheddingStrategy)
            placement = create_placement(config.loadBalancerLoadPlacementStrategy, shedder=shedder)
            plan = plan_shedding_cycle(load, config, shedder, placement, ctx, 1_000_000, random.Random(0))
            diff: list[str] = []
            if "expected_moves" in c:
                moves = {m.bundle: m.destination for m in plan.moves}
                diff += expect("moves", c["expected_moves"], moves)
            if "expected_destination_in" in c:
                for m in plan.moves:
                    allowed = c["expected_destination_in"].get(m.bundle)
                    if allowed is not None and m.destination not in allowed:
                        diff.append(f"{m.bundle} moved to {m.destination}, expected one of {allowed}")
            if "expected_skipped" in c:
                skipped = {s.subject: s.reason for s in plan.skipped}
                diff += expect("skipped", c["expected_skipped"], skipped)
            return diff

        cases.append((f"case {i}: {c.get('label', '')}".rstrip(": "), case))
    return run_cases(name, cases)


def handle_split_unload(name: str, data: dict[str, Any]) -> list[RoundReport]:
    """Each case: a cluster, policies and the split bundle's broker; does the auto split unload?"""
    inp = data["input"]
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(inp["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            config = vector_config(data.get("config"), c.get("config"))
            load = _cycle_load(c["brokers"])
            policies = [
                IsolationPolicy.from_pulsar(n, p) for n, p in (inp.get("isolation_policies") or {}).items()
            ]
            ctx = PlacementContext.from_load(
                load,
                isolation_policies=policies,
                anti_affinity_groups=dict(inp.get("anti_affinity_groups") or {}),
            )
            unload, why = split_unload(c["bundle"], c["broker"], load, config, ctx)
            diff = expect("unload", c["expected_unload"], unload)
            if "expected_reason" in c:
                diff += expect("reason", c["expected_reason"], why.reason)
            return diff

        cases.append((f"case {i}: {c.get('label', '')}".rstrip(": "), case))
    return run_cases(name, cases)
