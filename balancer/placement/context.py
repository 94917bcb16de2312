"""What placement needs to know beyond load data: isolation, anti-affinity, domains, who holds what.

Plain data, so the live leader can fill it from ZooKeeper (namespace isolation policies, local
policies' anti-affinity groups, failure domains) and the simulator can build it by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from balancer.errors import InvalidInput
from balancer.models import BrokerData, BundleData, LoadData
from balancer.placement.round_robin import RoundRobinBrokerSelector

DEFAULT_DOMAIN = "default"


@dataclass
class IsolationPolicy:
    """One namespace isolation policy in Pulsar's shape (regexes are full-match, as Java's ``matches``)."""

    name: str
    namespaces: list[str]
    primary: list[str]
    secondary: list[str] = field(default_factory=list)
    min_limit: int = 1  # auto_failover_policy min_available: use secondaries below this many primaries

    def __post_init__(self) -> None:
        for fld, pats in (
            ("namespaces", self.namespaces),
            ("primary", self.primary),
            ("secondary", self.secondary),
        ):
            for p in pats:
                try:
                    re.compile(p)
                except re.error as e:
                    raise InvalidInput(f"isolation policy {self.name}.{fld}", p, f"bad regex: {e}") from None

    def applies_to(self, namespace: str) -> bool:
        return any(re.fullmatch(p, namespace) for p in self.namespaces)

    def is_primary(self, host: str) -> bool:
        return any(re.fullmatch(p, host) for p in self.primary)

    def is_secondary(self, host: str) -> bool:
        return any(re.fullmatch(p, host) for p in self.secondary)

    @classmethod
    def from_pulsar(cls, name: str, data: Mapping[str, object]) -> IsolationPolicy:
        """Parse Pulsar's ``NamespaceIsolationData`` JSON (``auto_failover_policy.parameters.min_limit``)."""
        afp = data.get("auto_failover_policy") or {}
        params = afp.get("parameters", {}) if isinstance(afp, dict) else {}
        raw = params.get("min_limit", 1) if isinstance(params, dict) else 1
        try:
            min_limit = int(str(raw))
        except ValueError:
            raise InvalidInput(f"isolation policy {name}.min_limit", raw, "not an integer") from None

        def strs(key: str) -> list[str]:
            v = data.get(key) or []
            if not isinstance(v, list):
                raise InvalidInput(f"isolation policy {name}.{key}", v, "expected a list of regexes")
            return [str(x) for x in v]

        return cls(name, strs("namespaces"), strs("primary"), strs("secondary"), min_limit)


def broker_host(broker: str) -> str:
    """Host part of a broker id ``host:port`` (text before the last ``:``)."""
    return broker.rsplit(":", 1)[0] if ":" in broker else broker


@dataclass
class PlacementContext:
    """Cluster facts the filters read; one per leader cycle (or kept and refreshed by the leader)."""

    isolation_policies: list[IsolationPolicy] = field(default_factory=list)
    anti_affinity_groups: dict[str, str] = field(default_factory=dict)  # namespace -> group
    failure_domains: dict[str, str] = field(default_factory=dict)  # broker -> domain
    bundle_ranges: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # broker -> ns -> ranges
    preallocated_bundle_to_broker: dict[str, str] = field(default_factory=dict)
    non_persistent_bundles: set[str] = field(default_factory=set)
    this_load_manager_class: str | None = None  # None: the config's loadManagerClassName
    excluded_namespaces: set[str] | None = None  # None: the config's loadBalancerSheddingExcludedNamespaces
    available_brokers: list[str] | None = None  # None: the brokers of the load data
    # Cordoned brokers (drain, maintenance): never a candidate for a new bundle, whatever chooses
    # (shedding destinations, the orphan rule, an operator's unload without a destination). They
    # keep what they have; heartbeat namespaces stay pinned to their own broker.
    cordoned: frozenset[str] = frozenset()
    # Placement of shedding-excluded namespaces; keep the context (or this selector) across cycles.
    round_robin: RoundRobinBrokerSelector = field(default_factory=RoundRobinBrokerSelector)

    def brokers(self, load: LoadData) -> list[str]:
        """The brokers placement may choose from: the available ones less the cordoned ones."""
        live = self.available_brokers if self.available_brokers is not None else list(load.broker_data)
        if not self.cordoned:
            return list(live)
        return [b for b in live if b not in self.cordoned]

    def add_range(self, broker: str, bundle: str) -> None:
        if (parts := _ns_range(bundle)) is not None:
            self.bundle_ranges.setdefault(broker, {}).setdefault(parts[0], set()).add(parts[1])

    def rebuild_ranges(self, load: LoadData) -> None:
        """Pulsar's broker -> namespace -> ranges cache: reported bundles plus preallocated ones."""
        self.bundle_ranges = {broker: _ranges_of(data) for broker, data in load.broker_data.items()}

    def refresh(self, load: LoadData, changed: Iterable[str] | None = None) -> None:
        """Forget preallocations the target now reports (or whose target is gone); bring the ranges
        cache up to date: all of it, or (``changed``: the brokers whose reports changed since the
        last refresh) only those brokers' and the departed ones', the rest being as they were."""
        touched = set(changed) if changed is not None else None
        for bundle, broker in list(self.preallocated_bundle_to_broker.items()):
            data = load.broker_data.get(broker)
            if data is None or bundle in data.local_data.last_stats:
                del self.preallocated_bundle_to_broker[bundle]
                if data is not None:
                    data.preallocated_bundle_data.pop(bundle, None)
                    if touched is not None:
                        touched.add(broker)
        if touched is None:
            self.rebuild_ranges(load)
            return
        for broker in [b for b in self.bundle_ranges if b not in load.broker_data]:
            del self.bundle_ranges[broker]
        for broker in touched:
            data = load.broker_data.get(broker)
            if data is not None:
                self.bundle_ranges[broker] = _ranges_of(data)

    def preallocate(self, load: LoadData, bundle: str, broker: str, data: BundleData) -> None:
        """Pulsar's preallocation: ``bundle`` counts on ``broker`` (its load in the strategies that
        read preallocated bundles, its range in the even-distribution filter) until ``broker``
        reports it or leaves (:meth:`refresh`). One preallocated elsewhere moves here."""
        old = self.preallocated_bundle_to_broker.get(bundle)
        if old is not None and old != broker:
            self.release(load, bundle)
        target = load.broker_data.get(broker)
        if target is not None:
            target.preallocated_bundle_data[bundle] = data
        self.preallocated_bundle_to_broker[bundle] = broker
        self.add_range(broker, bundle)

    def release(self, load: LoadData, bundle: str, broker: str | None = None) -> bool:
        """Drop ``bundle``'s preallocation (only if it is to ``broker``, when given): its move was
        refused or went elsewhere, so its target will never report it. True when one was dropped."""
        target = self.preallocated_bundle_to_broker.get(bundle)
        if target is None or (broker is not None and target != broker):
            return False
        del self.preallocated_bundle_to_broker[bundle]
        data = load.broker_data.get(target)
        if data is not None:
            data.preallocated_bundle_data.pop(bundle, None)
        parts = _ns_range(bundle)
        if parts is not None and (data is None or bundle not in data.local_data.last_stats):
            ranges = self.bundle_ranges.get(target, {}).get(parts[0])
            if ranges is not None:
                ranges.discard(parts[1])
        return True

    @classmethod
    def from_load(cls, load: LoadData, **kw: object) -> PlacementContext:
        ctx = cls(**kw)  # type: ignore[arg-type]
        ctx.rebuild_ranges(load)
        return ctx


def _ranges_of(data: BrokerData) -> dict[str, set[str]]:
    """namespace -> ranges of one broker: its reported bundles and its preallocated ones."""
    per_ns: dict[str, set[str]] = {}
    for names in (data.local_data.last_stats, data.preallocated_bundle_data):
        for bundle in names:
            if (parts := _ns_range(bundle)) is not None:
                per_ns.setdefault(parts[0], set()).add(parts[1])
    return per_ns


def _ns_range(bundle: str) -> tuple[str, str] | None:
    """(namespace, range) of a bundle name; None for a name without one (never counted in a range)."""
    if "/" not in bundle:
        return None
    ns, rng = bundle.rsplit("/", 1)
    return ns, rng
