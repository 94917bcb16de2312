"""The filter chain's survivors for one namespace, computed from sparse per-cycle facts.

A leader cycle places thousands of bundles of ~2,000 namespaces over 1,000 brokers. The candidate
list after the policy and max-topics filters is shared by most namespaces; the even-distribution
filter then removes only the few brokers that already hold the namespace (when any candidate holds
none), and the load-manager-class filter only the brokers that run another class (usually none).
So a namespace's survivors are "a shared list minus a small set", found by walking the sparse
side. The explained chain (``pipeline._filter_chain``) stays the reference for the same result;
``tests/unit/test_placement_survivors.py`` pins the two against each other.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from balancer.placement.filters import FilterAborted


@dataclass
class Survivors:
    """``base`` minus ``removed`` (a subset of ``base``), in ``base`` order; the list on demand."""

    policy: list[str]
    base: list[str]
    base_set: frozenset[str]
    removed: frozenset[str] = frozenset()
    _list: list[str] | None = field(default=None, repr=False)

    def __contains__(self, broker: object) -> bool:
        return broker in self.base_set and broker not in self.removed

    def as_list(self) -> list[str]:
        if self._list is None:
            removed = self.removed
            self._list = [b for b in self.base if b not in removed] if removed else self.base
        return self._list

    def __len__(self) -> int:
        if self._list is None and len(self.base_set) == len(self.base):
            return len(self.base) - len(self.removed)
        return len(self.as_list())


def even_distribution_removed(base_set: Collection[str], counts: Mapping[str, int]) -> frozenset[str]:
    """The brokers the even-distribution filter drops from ``base_set``.

    ``counts`` lists only brokers holding at least one bundle of the namespace, so when some
    candidate is absent from it the least is 0 and exactly the listed candidates go.
    """
    held = [b for b in counts if b in base_set]
    if len(held) < len(base_set):
        return frozenset(held)
    if not held:
        return frozenset()
    least = min(counts[b] for b in held)
    return frozenset(b for b in held if counts[b] != least)


def other_class_removed(base_set: Collection[str], other_class: Collection[str]) -> frozenset[str]:
    """The brokers the load-manager-class filter drops: those whose data names another class."""
    if len(other_class) <= len(base_set):
        return frozenset(b for b in other_class if b in base_set)
    return frozenset(b for b in base_set if b in other_class)


@dataclass
class SurvivorInputs:
    """What the fast chain reads, all fixed for a cycle (built by ``PipelineCache``)."""

    policy: list[str]
    after_max_topics: list[str]
    as_set: Callable[[list[str]], frozenset[str]]
    anti_affinity: Callable[[list[str]], list[str]] | None  # None: the namespace has no group
    namespace_counts: Mapping[str, int] | None  # None: even distribution does not apply
    other_class: Collection[str]
    # None: preferLaterVersions is off; raises FilterAborted when it cannot decide.
    version_filter: Callable[[list[str]], list[str]] | None


def survivors(inp: SurvivorInputs) -> Survivors:
    """Same survivors as the explained chain, without explaining (see the module docstring)."""
    policy = inp.policy
    base = inp.after_max_topics
    if inp.anti_affinity is not None:
        base = inp.anti_affinity(base)
    base_set = inp.as_set(base)
    removed: frozenset[str] = frozenset()
    if inp.namespace_counts is not None:
        removed = even_distribution_removed(base_set, inp.namespace_counts)
    if inp.other_class:
        removed = removed | other_class_removed(base_set, inp.other_class)
    if inp.version_filter is not None:
        current = [b for b in base if b not in removed]
        try:
            base = inp.version_filter(current)
        except FilterAborted:
            return Survivors(policy, list(policy), inp.as_set(policy))
        base_set, removed = inp.as_set(base), frozenset()
    if len(removed) >= len(base_set):
        return Survivors(policy, list(policy), inp.as_set(policy))
    return Survivors(policy, base, base_set, removed)
