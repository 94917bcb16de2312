"""The leader's LoadData, kept current from the store (Pulsar's ``updateAll``).

Each refresh reads one full snapshot: live brokers and their reports, namespace layouts,
ownership, assignments, stored bundle data and quotas. New brokers are added, dead ones removed
(strategies are told the new active set), and, when asked, one ``updateBundleData`` sample is
taken. Preallocations whose broker died or that the broker now reports are forgotten.

Bundle data is shared with the long-term Spark job (``service.longterm.merge``), which replaces only
``longTermData`` of a node. The view remembers, per bundle it holds, the node version it last saw
when it first met the bundle or last wrote the node itself. A sampling refresh that finds a node at
another version adopts the node's ``longTermData`` (short-term data and topic count stay the
leader's) before taking its sample, so the leader's samples continue the merged window; the
bundle-data writer then writes compare-and-set against that version (``expected_version``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from balancer.bundles import NamespaceBundles
from balancer.loaddata import update_bundle_data
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData
from balancer.placement.base import PlacementStrategy
from balancer.placement.context import PlacementContext
from balancer.shedding.base import LoadSheddingStrategy
from service.zookeeper.store import Assignment, Owner, Versioned, ZkStore

log = logging.getLogger(__name__)


@dataclass
class Snapshot:
    """One read of everything a decision needs."""

    time_ms: int
    brokers: dict[str, LocalBrokerData]
    layouts: dict[str, Versioned[NamespaceBundles]]
    owners: dict[str, Owner]
    assignments: dict[str, Versioned[Assignment]]
    stored_bundle_data: dict[str, BundleData] = field(default_factory=dict)
    stored_versions: dict[str, int] = field(default_factory=dict)  # node version per stored bundle
    sampled: bool = False  # stored_* were read by this refresh (a sampling one)
    new_brokers: set[str] = field(default_factory=set)
    dead_brokers: set[str] = field(default_factory=set)
    dropped_bundles: list[str] = field(default_factory=list)
    adopted_long_term: list[str] = field(default_factory=list)

    def live_bundles(self) -> set[str]:
        return {b for got in self.layouts.values() for b in got.value.bundle_names}

    def owner_map(self) -> dict[str, str]:
        return {b: o.broker for b, o in self.owners.items()}


class LoadView:
    """LoadData and the placement context, carried from one refresh to the next."""

    def __init__(self, on_adopt: Callable[[list[str]], None] | None = None) -> None:
        """``on_adopt(bundles)`` is told, once per refresh, which bundles' longTermData was adopted."""
        self.adopted_long_term_total = 0
        self._on_adopt = on_adopt
        self.reset()

    def reset(self) -> None:
        self.load = LoadData()
        self.ctx = PlacementContext()
        self.known_brokers: set[str] = set()
        self.last: Snapshot | None = None
        # Bundle-data node version per bundle in ``load.bundle_data``; absent: no node seen.
        self.bundle_data_versions: dict[str, int] = {}

    def expected_version(self, bundle: str) -> int:
        """The version a compare-and-set write of ``bundle``'s node must present (-1: no node)."""
        return self.bundle_data_versions.get(bundle, -1)

    def wrote(self, bundle: str, version: int) -> None:
        self.bundle_data_versions[bundle] = version

    def seeded(self, bundle: str, version: int | None) -> None:
        """``bundle`` entered ``load.bundle_data`` from its stored node at ``version`` (None: no node):
        the next refresh must see that node as already known, not as another writer's change."""
        self.bundle_data_versions[bundle] = -1 if version is None else version

    def forget(self, bundle: str) -> None:
        """Drop a bundle (e.g. a split parent): if it comes back it is seeded again from the store."""
        self.load.bundle_data.pop(bundle, None)
        self.bundle_data_versions.pop(bundle, None)

    def refresh(
        self,
        store: ZkStore,
        now_ms: int,
        strategies: tuple[LoadSheddingStrategy, PlacementStrategy],
        sample: bool = True,
    ) -> Snapshot:
        brokers = store.read_brokers()
        snap = Snapshot(
            time_ms=now_ms,
            brokers=brokers,
            layouts=store.read_layouts(),
            owners=store.read_owners(),
            assignments=store.read_assignments(),
        )
        current = set(brokers)
        snap.new_brokers = current - self.known_brokers
        snap.dead_brokers = self.known_brokers - current
        for gone in snap.dead_brokers:
            self.load.broker_data.pop(gone, None)
        for broker, local in brokers.items():
            data = self.load.broker_data.get(broker)
            if data is None:
                self.load.broker_data[broker] = BrokerData(local_data=local)
            else:
                data.local_data = local
        if snap.new_brokers or snap.dead_brokers:
            for strategy in strategies:
                strategy.on_active_brokers_change(set(current))
        self.known_brokers = current
        if sample:
            nodes = store.read_bundle_data_versioned()
            snap.stored_bundle_data = {b: got.value for b, got in nodes.items() if got.value is not None}
            snap.stored_versions = {b: got.version for b, got in nodes.items()}
            snap.sampled = True
            snap.adopted_long_term = self._adopt_external(nodes)
            held = set(self.load.bundle_data)
            snap.dropped_bundles = update_bundle_data(
                self.load, now_ms, snap.stored_bundle_data, store.read_quotas()
            )
            for bundle in self.load.bundle_data.keys() - held:  # first sight: seeded from this read
                got = nodes.get(bundle)
                self.bundle_data_versions[bundle] = -1 if got is None else got.version
            for bundle in snap.dropped_bundles:
                self.bundle_data_versions.pop(bundle, None)
        self.ctx.available_brokers = sorted(current)
        self.ctx.refresh(self.load)
        self.last = snap
        return snap

    def _adopt_external(self, nodes: dict[str, Versioned[BundleData | None]]) -> list[str]:
        """Take ``longTermData`` from each held bundle's node that another writer changed since we saw it."""
        adopted: list[str] = []
        versions = self.bundle_data_versions
        for bundle, data in self.load.bundle_data.items():
            got = nodes.get(bundle)
            if got is None:
                versions[bundle] = -1  # node deleted: the next write creates it again
                continue
            known = versions.get(bundle)
            if known == got.version:
                continue
            versions[bundle] = got.version
            if known is None:
                # Held without ever having seen its node (placed before the node was read): this is
                # the first sight of the node, not a change by another writer. Seed from it quietly.
                if got.value is not None:
                    data.long_term_data = got.value.long_term_data.model_copy(deep=True)
                continue
            if got.value is not None:  # a malformed node has nothing to adopt; the next write repairs it
                data.long_term_data = got.value.long_term_data.model_copy(deep=True)
                adopted.append(bundle)
        if adopted:
            self.adopted_long_term_total += len(adopted)
            log.info(
                "adopted longTermData written by another writer for %d bundle(s), e.g. %s",
                len(adopted),
                adopted[0],
            )
            if self._on_adopt is not None:
                self._on_adopt(adopted)
        return adopted
