"""Pulsar's broker filters for placement, each returning the survivors and who it removed and why.

Order and fallbacks follow ``ModularLoadManagerImpl.selectBroker``; the pipeline strings them
together. Every filter keeps the candidates' order, so a seeded choice is reproducible.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from balancer.bundles import SYSTEM_NAMESPACE
from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import LoadData
from balancer.placement.context import DEFAULT_DOMAIN, PlacementContext, broker_host

Filtered = tuple[list[str], Explanation]
# An explanation lists at most this many removed brokers by name (a 1,000-broker cluster would
# otherwise carry a thousand reasons per filter per bundle); the count is always complete.
MAX_LISTED = 50


class FilterAborted(Exception):
    """A filter could not decide (Pulsar's BrokerFilterException): the pipeline restores the policy set."""

    def __init__(self, filter_name: str, broker: str, reason: str) -> None:
        self.filter_name, self.broker, self.reason = filter_name, broker, reason
        super().__init__(f"{filter_name}: {broker}: {reason}")


def _step(
    name: str, before: Sequence[str], after: Sequence[str], why: Mapping[str, str], **nums: Any
) -> Explanation:
    kept = set(after)
    gone = [b for b in before if b not in kept]
    removed = {b: why.get(b, "") for b in gone[:MAX_LISTED]}
    msg = f"kept {len(after)} of {len(before)}" + (f", removed {len(gone)}" if gone else "")
    if len(gone) > MAX_LISTED:
        nums["removed_not_listed"] = len(gone) - MAX_LISTED
    return explain(name, msg, before=len(before), after=len(after), removed=removed, **nums)


# ---- 1. namespace policies ---------------------------------------------------------------------
def namespace_policy_candidates(
    namespace: str, bundle: str, brokers: Sequence[str], load: LoadData, ctx: PlacementContext
) -> Filtered:
    """The policy set P: an isolated namespace gets its primaries (plus secondaries when too few
    primaries are up); any other namespace gets the shared brokers that serve its topic mode."""
    policy = next((p for p in ctx.isolation_policies if p.applies_to(namespace)), None)
    why: dict[str, str] = {}
    if policy is not None:
        primaries = [b for b in brokers if policy.is_primary(broker_host(b))]
        secondaries = [b for b in brokers if b not in primaries and policy.is_secondary(broker_host(b))]
        failover = len(primaries) < policy.min_limit
        out = primaries + (secondaries if failover else [])
        for b in brokers:
            if b not in out:
                why[b] = (
                    "secondary of the isolation policy, enough primaries available"
                    if b in secondaries
                    else "not in the namespace's isolation policy"
                )
        return out, _step(
            "namespace_isolation",
            brokers,
            out,
            why,
            policy=policy.name,
            primaries=len(primaries),
            secondaries=len(secondaries),
            min_limit=policy.min_limit,
            failover_to_secondaries=failover,
        )
    non_persistent = bundle in ctx.non_persistent_bundles
    out = []
    for b in brokers:
        host = broker_host(b)
        if any(p.is_primary(host) for p in ctx.isolation_policies):
            why[b] = "primary broker of an isolation policy (not shared)"
            continue
        data = load.broker_data.get(b)
        if data is None:
            why[b] = "no load data (topic mode unknown)"
            continue
        ok = (
            data.local_data.non_persistent_topics_enabled
            if non_persistent
            else data.local_data.persistent_topics_enabled
        )
        if not ok:
            why[b] = f"does not serve {'non-' if non_persistent else ''}persistent topics"
            continue
        out.append(b)
    return out, _step("shared_brokers", brokers, out, why, non_persistent=non_persistent)


# ---- 2. max topics --------------------------------------------------------------------------------
def broker_topic_counts(load: LoadData, brokers: Sequence[str]) -> dict[str, int]:
    """numTopics plus the topics of preallocated bundles (0 for a broker without data)."""
    out: dict[str, int] = {}
    for b in brokers:
        data = load.broker_data.get(b)
        if data is None:
            out[b] = 0
            continue
        out[b] = data.local_data.num_topics + sum(d.topics for d in data.preallocated_bundle_data.values())
    return out


def max_topics_filter(
    candidates: Sequence[str], topic_counts: Mapping[str, int], max_topics: int
) -> Filtered:
    out = [b for b in candidates if topic_counts.get(b, 0) <= max_topics]
    why = {
        b: f"{topic_counts.get(b, 0)} topics > {max_topics}"
        for b in candidates
        if topic_counts.get(b, 0) > max_topics
    }
    if not out:
        # Pulsar keeps everybody rather than leave nobody to place on.
        return list(candidates), _step(
            "max_topics", candidates, candidates, {}, max_topics=max_topics, all_over_kept=True
        )
    return out, _step("max_topics", candidates, out, why, max_topics=max_topics)


# ---- 3. anti-affinity -----------------------------------------------------------------------------
def anti_affinity_counts(ctx: PlacementContext, group: str) -> dict[str, int]:
    """broker -> number of namespaces of ``group`` it holds bundles of (brokers with none absent).

    Group names compare case-insensitively, as ``LoadManagerShared.getAntiAffinityNamespaceOwnedBrokers``
    does (``equalsIgnoreCase``): an operator's ``Payments`` and ``payments`` are one group."""
    key = group.casefold()
    members = {ns for ns, g in ctx.anti_affinity_groups.items() if g.casefold() == key}
    out: dict[str, int] = {}
    for broker, per_ns in ctx.bundle_ranges.items():
        n = sum(1 for ns, r in per_ns.items() if r and ns in members)
        if n:
            out[broker] = n
    return out


def anti_affinity_filter(
    candidates: Sequence[str], counts: Mapping[str, int], ctx: PlacementContext, domains_enabled: bool
) -> Filtered:
    cands = list(candidates)
    why: dict[str, str] = {}
    nums: dict[str, Any] = {}
    if domains_enabled and cands:
        per_domain: dict[str, int] = {}
        for b in cands:
            d = ctx.failure_domains.get(b, DEFAULT_DOMAIN)
            per_domain[d] = per_domain.get(d, 0) + counts.get(b, 0)
        least_d = min(per_domain.values())
        kept = [b for b in cands if per_domain[ctx.failure_domains.get(b, DEFAULT_DOMAIN)] == least_d]
        for b in cands:
            if b not in kept:
                d = ctx.failure_domains.get(b, DEFAULT_DOMAIN)
                why[b] = f"domain {d} holds {per_domain[d]} group namespaces > least {least_d}"
        nums["domain_counts"] = per_domain
        cands = kept
    if cands:
        least = min(counts.get(b, 0) for b in cands)
        kept = [b for b in cands if counts.get(b, 0) == least]
        for b in cands:
            if b not in kept:
                why[b] = f"holds {counts[b]} namespaces of the anti-affinity group > least {least}"
        nums["least"] = least
        cands = kept
    return cands, _step("anti_affinity", candidates, cands, why, **nums)


def anti_affinity_allows_unload(
    source: str, candidates: Sequence[str], counts: Mapping[str, int]
) -> Explanation | None:
    """Pulsar's ``LoadManagerShared.shouldAntiAffinityNamespaceUnload``: None when the unload may go
    ahead, else why not.

    ``candidates`` is the namespace's policy set (``applyNamespacePolicies`` over the available
    brokers, as ``ModularLoadManagerImpl.shouldAntiAffinityNamespaceUnload`` computes it), not
    every broker: a broker the namespace may not use cannot take the bundle either. The unload is
    refused only when the source holds the least count, that count is not zero, and *every*
    candidate holds exactly that count: then wherever the bundle went the group would be no more
    spread than it is. When some candidate holds more, moving may still spread the group.
    """
    if not counts:
        return None
    least = min((counts.get(b, 0) for b in candidates), default=0)
    here = counts.get(source, 0) if source in candidates else 0
    if least == 0 or here > least:
        return None
    at_least = sum(1 for b in candidates if counts.get(b, 0) == least)
    if at_least != len(candidates):
        return None
    return explain(
        "anti_affinity_blocks_unload",
        f"all {len(candidates)} candidate brokers hold {least} namespaces of the anti-affinity group",
        subject=source,
        source_count=here,
        least=least,
        candidates=len(candidates),
    )


# ---- 4. even distribution -------------------------------------------------------------------------
def namespace_range_counts(ctx: PlacementContext, namespace: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for broker, per_ns in ctx.bundle_ranges.items():
        r = per_ns.get(namespace)
        if r:
            out[broker] = len(r)
    return out


def even_distribution_applies(namespace: str, config: LoadBalancerConfig) -> bool:
    return config.loadBalancerDistributeBundlesEvenlyEnabled or namespace == SYSTEM_NAMESPACE


def even_distribution_filter(candidates: Sequence[str], counts: Mapping[str, int]) -> Filtered:
    """Keep the candidates holding the fewest bundles of the namespace."""
    if not candidates:
        return [], _step("even_distribution", candidates, [], {})
    least = min(counts.get(b, 0) for b in candidates)
    out = [b for b in candidates if counts.get(b, 0) == least]
    why = {
        b: f"holds {counts.get(b, 0)} bundles of the namespace > least {least}"
        for b in candidates
        if counts.get(b, 0) != least
    }
    return out, _step("even_distribution", candidates, out, why, least=least)


# ---- 5a. load manager class -----------------------------------------------------------------------
def load_manager_class_filter(candidates: Sequence[str], load: LoadData, this_class: str) -> Filtered:
    """Drop brokers whose load data names another load manager class (or none); no data: keep."""
    why: dict[str, str] = {}
    for b in candidates:
        data = load.broker_data.get(b)
        if data is not None and data.local_data.load_manager_class_name != this_class:
            why[b] = f"runs {data.local_data.load_manager_class_name}"
    out = [b for b in candidates if b not in why]
    return out, _step("load_manager_class", candidates, out, why, expected=this_class)


# ---- 5b. broker version ---------------------------------------------------------------------------
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$"
)


@dataclass(frozen=True)
class Version:
    """Semantic version with Pulsar's build-aware order (pre-release < release; build compared last)."""

    major: int
    minor: int
    patch: int
    pre_release: str = ""
    build: str = ""

    @classmethod
    def parse(cls, text: str) -> Version:
        m = _SEMVER.match(text.strip())
        if m is None:
            raise ValueError(f"not a semantic version: {text!r}")
        return cls(int(m[1]), int(m[2]), int(m[3]), m[4] or "", m[5] or "")

    def key(self) -> tuple[Any, ...]:
        def idents(s: str) -> tuple[tuple[int, int, str], ...]:
            return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in s.split("."))

        # A release sorts after any of its pre-releases; a build sorts after no build.
        pre = (1, ()) if not self.pre_release else (0, idents(self.pre_release))
        build = (0, ()) if not self.build else (1, idents(self.build))
        return (self.major, self.minor, self.patch, pre, build)

    def __str__(self) -> str:
        pre = f"-{self.pre_release}" if self.pre_release else ""
        return f"{self.major}.{self.minor}.{self.patch}{pre}" + (f"+{self.build}" if self.build else "")


def broker_version_filter(
    candidates: Sequence[str], load: LoadData
) -> tuple[list[str], Explanation, Version | None]:
    """Keep only brokers of the newest version; raises :class:`FilterAborted` on missing or bad data."""
    versions: dict[str, Version] = {}
    for b in candidates:
        data = load.broker_data.get(b)
        text = data.local_data.broker_version_string if data is not None else None
        if not text:
            raise FilterAborted("broker_version", b, "no broker version in load data")
        try:
            versions[b] = Version.parse(text)
        except ValueError as e:
            raise FilterAborted("broker_version", b, str(e)) from None
    if not versions:
        return [], _step("broker_version", candidates, [], {}), None
    latest = max(versions.values(), key=Version.key)
    out = [b for b in candidates if versions[b] == latest]
    why = {b: f"version {versions[b]} older than {latest}" for b in candidates if versions[b] != latest}
    return out, _step("broker_version", candidates, out, why, latest=str(latest)), latest
