"""The leader's LoadData, kept current from the store (Pulsar's ``updateAll``).

Each refresh reads one full snapshot: live brokers and their reports, namespace layouts,
ownership, assignments, stored bundle data and quotas. New brokers are added, dead ones removed
(strategies are told the new active set), and, when asked, one ``updateBundleData`` sample is
taken. Preallocations whose broker died or that the broker now reports are forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from balancer.bundles import NamespaceBundles
from balancer.loaddata import update_bundle_data
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData
from balancer.placement.base import PlacementStrategy
from balancer.placement.context import PlacementContext
from balancer.shedding.base import LoadSheddingStrategy
from service.store import Assignment, Owner, Versioned, ZkStore


@dataclass
class Snapshot:
    """One read of everything a decision needs."""

    time_ms: int
    brokers: dict[str, LocalBrokerData]
    layouts: dict[str, Versioned[NamespaceBundles]]
    owners: dict[str, Owner]
    assignments: dict[str, Versioned[Assignment]]
    stored_bundle_data: dict[str, BundleData] = field(default_factory=dict)
    new_brokers: set[str] = field(default_factory=set)
    dead_brokers: set[str] = field(default_factory=set)
    dropped_bundles: list[str] = field(default_factory=list)

    def live_bundles(self) -> set[str]:
        return {b for got in self.layouts.values() for b in got.value.bundle_names}

    def owner_map(self) -> dict[str, str]:
        return {b: o.broker for b, o in self.owners.items()}


class LoadView:
    """LoadData and the placement context, carried from one refresh to the next."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.load = LoadData()
        self.ctx = PlacementContext()
        self.known_brokers: set[str] = set()
        self.last: Snapshot | None = None

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
            snap.stored_bundle_data = store.read_bundle_data()
            snap.dropped_bundles = update_bundle_data(
                self.load, now_ms, snap.stored_bundle_data, store.read_quotas()
            )
        self.ctx.available_brokers = sorted(current)
        self.ctx.refresh(self.load)
        self.last = snap
        return snap
