"""The leader's LoadData, kept current from the store (Pulsar's ``updateAll``).

Each refresh takes one snapshot: live brokers and their reports, namespace layouts, ownership,
assignments, stored bundle data and quotas. The snapshot comes from a watch-fed cache
(:class:`ClusterCache` on :mod:`service.zookeeper.session.cache`): the first refresh of a term (and the
first after a connection gap) reads everything; later ones read only the nodes whose watches
fired, so an unchanged cluster costs no read per bundle. Which broker serves which bundle comes,
as in Pulsar, from the brokers' reports (``LocalBrokerData.bundles``, through ``updateBundleData``);
ownership nodes are followed too, for orphan detection and the ownership protocol. New brokers are
added, dead ones removed (strategies are told the new active set). Preallocations whose broker died
or that the broker now reports are forgotten.

Bundle time averages are sampled per report, as Pulsar samples on each report notification: every
refresh folds the reports that changed since the last one (:func:`balancer.report_fold.fold_reports`)
and nothing else, so a refresh of an unchanged cluster does no work per bundle, and a report is
sampled once however many refreshes (or full re-reads after a connection gap) see it. A report is
known by its node version and its ``lastUpdate`` (a broker that re-registers starts a new node at
version 0 again). A new term starts from scratch: its first refresh folds every report once.

Bundle data is shared with the long-term Spark job (``service.longterm.merge``), which replaces only
``longTermData`` of a node. The view remembers, per bundle it holds, the node version it last saw
when it first met the bundle or last wrote the node itself (its own writes are told to the cache, so
they are never read back). A sampling refresh that finds a node at another version adopts the
node's ``longTermData`` (short-term data and topic count stay the leader's) before taking its
sample, so the leader's samples continue the merged window; the bundle-data writer then writes
compare-and-set against that version (``expected_version``). Only nodes the cache saw change since
the last refresh are looked at (its journal), all of them after a full re-read.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from balancer.bundles import NamespaceBundles
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData
from balancer.placement.base import PlacementStrategy
from balancer.placement.context import PlacementContext
from balancer.report_fold import ReportIndex, fold_reports, refresh_time_averages
from balancer.shedding.base import LoadSheddingStrategy
from service.leader.stored_bundles import Packed, StoredBundles, pack
from service.zookeeper import paths as P
from service.zookeeper.metadata.policies import PlacementPolicies, PolicyTrees
from service.zookeeper.metadata.records import parse_assignment, parse_layout, parsed_as_is
from service.zookeeper.metadata.store import Assignment, Owner, Versioned, ZkStore
from service.zookeeper.session.cache import SyncStats, WatchCache, WatchedTree, depth_leaf
from service.zookeeper.session.validate import BadNode, decode

log = logging.getLogger(__name__)

# brokers and owners as read from ZooKeeper -> as the brokers' kind completes them.
Overlay = Callable[
    [dict[str, LocalBrokerData], dict[str, Owner]], tuple[dict[str, LocalBrokerData], dict[str, Owner]]
]


@dataclass
class Snapshot:
    """One read of everything a decision needs."""

    time_ms: int
    brokers: dict[str, LocalBrokerData]
    layouts: dict[str, Versioned[NamespaceBundles]]
    owners: dict[str, Owner]
    assignments: dict[str, Versioned[Assignment]]
    stored_bundle_data: Mapping[str, BundleData] = field(default_factory=dict)
    folded: list[str] = field(default_factory=list)  # brokers whose new reports this refresh sampled
    new_brokers: set[str] = field(default_factory=set)
    dead_brokers: set[str] = field(default_factory=set)
    bundle_data_versions: dict[str, int] = field(default_factory=dict)  # every node, malformed too
    report_versions: dict[str, int] = field(default_factory=dict)  # broker -> report node version
    bundle_data_mark: tuple[int, int] | None = None  # the bundle-data journal's position at this read
    owner_versions: dict[str, int] = field(default_factory=dict)  # every ownership node, malformed too
    quotas: dict[str, Any] = field(default_factory=dict)
    dropped_bundles: list[str] = field(default_factory=list)
    adopted_long_term: list[str] = field(default_factory=list)
    policies: PlacementPolicies = field(default_factory=PlacementPolicies)  # placement's, from the cache

    def live_bundles(self) -> set[str]:
        return {b for got in self.layouts.values() for b in got.value.bundle_names}

    def owner_map(self) -> dict[str, str]:
        return {b: o.broker for b, o in self.owners.items()}


@dataclass(frozen=True)
class _Stat:
    """The part of a ZnodeStat a decoder reads, for values this process wrote itself."""

    version: int
    ephemeralOwner: int = 0  # ZooKeeper's field name


class ClusterCache:
    """The trees a leader follows, on one store session (and, when Pulsar's configuration store is
    another ZooKeeper, the isolation policies, failure domains and namespace Policies on a session
    of that one); built lazily by :class:`LoadView`."""

    def __init__(self, store: ZkStore, config_store: ZkStore | None = None) -> None:
        self.store = store
        self.watch = WatchCache(store)
        self.config_store = config_store
        self.config_watch = WatchCache(config_store) if config_store is not None else None
        w = self.watch
        cw = self.config_watch or w
        self.brokers: WatchedTree[LocalBrokerData] = w.tree(
            "brokers", P.BROKERS, store.decode_broker, depth_leaf(1), 1
        )
        self.layouts: WatchedTree[Versioned[NamespaceBundles]] = w.tree(
            "layouts", P.LOCAL_POLICIES, store.decode_layout, depth_leaf(2), 2
        )
        # Pulsar's NamespaceBundleFactory falls back to the namespace's Policies (/admin/policies) for
        # a namespace no broker has loaded yet (no local policies): its layout counts then.
        self.policy_layouts: WatchedTree[Versioned[NamespaceBundles]] = cw.tree(
            "policy-layouts", P.TENANT_POLICIES, self._decode_policies_layout, depth_leaf(2), 2
        )
        self.owners: WatchedTree[Owner] = w.tree("owners", P.OWNERSHIP, store.decode_owner)
        self.assignments: WatchedTree[Versioned[Assignment]] = w.tree(
            "assignments", P.ASSIGNMENTS, store.decode_assignment
        )
        # Packed (service.leader.stored_bundles): read rarely, held for every bundle.
        self.bundle_data: WatchedTree[Packed] = w.tree("bundle-data", P.BUNDLE_DATA, self._decode_bundle_data)
        # Pulsar 2.8+ keeps quotas at <RESOURCE_QUOTA>/<bundle>; pre-2.8 nodes under namespace/ count
        # only where no new one exists (as ZkStore.read_quotas).
        self.quotas: WatchedTree[Any] = w.tree("quotas", P.RESOURCE_QUOTA, store.decode_quota)
        self.legacy_quotas: WatchedTree[Any] = w.tree(
            "legacy-quotas", P.RESOURCE_QUOTA_LEGACY, store.decode_quota
        )
        # Isolation policies, failure domains, anti-affinity groups: watched too, so a refresh of an
        # unchanged cluster reads none of them.
        self.policies = PolicyTrees(config_store or store, w, self.config_watch)
        self.last_stats: dict[str, SyncStats] = {}
        # One syncer at a time (jobs and the REST view): trees are read and mutated under it.
        self.lock = threading.Lock()

    def sync(self) -> dict[str, SyncStats]:
        stats = self.watch.sync()
        if self.config_watch is not None:
            stats.update({f"config:{k}": v for k, v in self.config_watch.sync().items()})
        self.last_stats = stats
        return self.last_stats

    def layouts_now(self) -> dict[str, Versioned[NamespaceBundles]]:
        """Local policies' layouts, and Policies' for namespaces without local policies."""
        found = dict(self.policy_layouts.values)
        found.update(self.layouts.values)
        return found

    def _decode_bundle_data(self, path: str, raw: bytes, stat: Any) -> Packed | None:
        data = self.store.decode_bundle_data(path, raw, stat)
        return None if data is None else pack(data)

    def _decode_policies_layout(self, path: str, raw: bytes, stat: Any) -> Versioned[NamespaceBundles] | None:
        namespace = path[len(P.TENANT_POLICIES) + 1 :]
        store = self.config_store or self.store
        try:
            doc = decode(raw)  # the one JSON boundary: size and depth bounded
        except BadNode:
            return None  # not ours to judge: Policies hold far more than a layout
        if not isinstance(doc, dict) or not isinstance(doc.get("bundles"), dict):
            return None
        return store.parse_node(path, raw, stat, lambda d: parse_layout(namespace, d))


class LoadView:
    """LoadData and the placement context, carried from one refresh to the next."""

    def __init__(
        self,
        on_adopt: Callable[[list[str]], None] | None = None,
        cluster: str = "",
        config_store: ZkStore | None = None,
    ) -> None:
        """``on_adopt(bundles)`` is told, once per refresh, which bundles' longTermData was adopted;
        ``cluster`` names whose isolation policies and failure domains apply ("": the only one)."""
        self.cluster = cluster
        self.config_store = config_store
        self.adopted_long_term_total = 0
        self._on_adopt = on_adopt
        # Cordoned brokers (service.leader.cordons), kept across terms; each refresh hands them to
        # placement through the context.
        self.cordoned: frozenset[str] = frozenset()
        self.cache: ClusterCache | None = None
        self._cache_lock = threading.Lock()
        # Pulsar mode: the brokers' kind completes what ZooKeeper holds of their load and ownership
        # (service.pulsar.broker_kind); None: ZooKeeper's nodes are the whole picture.
        self.overlay: Overlay | None = None
        # ...and where ownership is kept when it is not ZooKeeper's nodes (None, or returning None:
        # read the nodes).
        self.owners_elsewhere: Callable[[], dict[str, Owner] | None] | None = None
        self.reset()

    def reset(self) -> None:
        self.load = LoadData()
        self.ctx = PlacementContext()
        self.known_brokers: set[str] = set()
        self.last: Snapshot | None = None
        # Bundle-data node version per bundle in ``load.bundle_data``; absent: no node seen.
        self.bundle_data_versions: dict[str, int] = {}
        self.reports = ReportIndex()  # the bundles of every folded report
        self.folded: dict[str, tuple[int, int]] = {}  # broker -> (node version, lastUpdate) folded
        self._data_cursor: tuple[int, int] | None = None  # where the bundle-data journal was read
        self._forgot = False  # a held bundle was dropped outside a fold: the next fold rechecks
        if self.cache is not None:  # a new term (or a test's fresh start) re-reads everything once
            self.cache.watch.request_resync()
            if self.cache.config_watch is not None:
                self.cache.config_watch.request_resync()

    def cache_for(self, store: ZkStore) -> ClusterCache:
        """The cache on ``store``'s session (a different store starts a new cache)."""
        with self._cache_lock:
            if self.cache is None or self.cache.store is not store:
                self.cache = ClusterCache(store, self.config_store)
            return self.cache

    def prefetch(self, store: ZkStore) -> None:
        """Bring the cache up to date without touching LoadData: the ZooKeeper reads of the next
        refresh, done before its caller takes any lock of its own (a full resync at 100,000
        bundles takes seconds; REST calls need not wait for it)."""
        cache = self.cache_for(store)
        with cache.lock:
            cache.sync()

    def snapshot(self, store: ZkStore, now_ms: int, bundle_data: bool = False) -> Snapshot:
        """Brokers, layouts, owners and assignments (and, when asked, stored bundle data and its
        versions) as the cache has them after one sync; no sample. Safe from any thread."""
        cache = self.cache_for(store)
        with cache.lock:
            cache.sync()
            snap = _snapshot_of(cache, now_ms, bundle_data, self.cluster)
        if self.overlay is not None:
            owners = snap.owners
            snap.brokers, snap.owners = self.overlay(snap.brokers, snap.owners)
            if snap.owners is not owners:  # ownership read elsewhere than ZooKeeper's nodes
                snap.owner_versions = {b: o.version for b, o in snap.owners.items()}
        return snap

    def wrote_assignment(self, bundle: str, doc: bytes | None, version: int) -> None:
        """Our own assignment write of ``doc`` (None: deleted), so the cache does not read it back."""
        self.wrote_assignments([(bundle, doc, version, None)])

    def wrote_assignments(self, notes: Iterable[tuple[str, bytes | None, int, Assignment | None]]) -> None:
        """Our own assignment writes, ``(bundle, doc, version, value)`` (doc None: deleted), under one
        hold of the cache's lock: a whole plan notes tens of thousands. ``value``, when given, is the
        assignment ``doc`` was made from (``ZkExecutor.unload_many``'s ``written``): taken as it is
        when it is one the record parser would return, so nothing is parsed back."""
        cache = self.cache
        if cache is None:
            return
        tree = cache.assignments
        with cache.lock:
            for bundle, doc, version, value in notes:
                if doc is None:
                    tree.note_deleted(bundle)
                    continue
                if value is None or not parsed_as_is(value):
                    # Decoded by the store's own record parser from the very bytes written: the cache
                    # holds what a read would return. Our own bytes: no size and depth bounds, no
                    # malformed log (a cycle notes tens of thousands of writes).
                    try:
                        value = parse_assignment(json.loads(doc))
                    except (ValueError, BadNode):
                        got = cache.store.decode_assignment(P.assignment_path(bundle), doc, _Stat(version))
                        tree.note_written(bundle, got, version)
                        continue
                tree.note_written(bundle, Versioned(value, version), version)

    def nodes_now(self, store: ZkStore, tree: str, bundles: list[str]) -> dict[str, Any] | None:
        """``bundles``' values in the watch-fed tree ``tree`` ("owners", "assignments"), brought up
        to date first: only the nodes whose watch fired are read, so following thousands of moves
        costs what changed, not a read per move. None when the tree must first be read whole (a new
        term, a connection gap): the caller reads its nodes itself rather than all of them here."""
        cache = self.cache
        if cache is None or cache.store is not store:
            return None
        with cache.lock:
            watched = cache.watch.trees[tree]
            if watched.needs_resync:
                return None
            cache.watch.sync([tree])
            values = watched.values
            return {b: got for b in bundles if (got := values.get(b)) is not None}

    def deleted_bundle_data(self, bundle: str) -> None:
        if self.cache is not None:
            with self.cache.lock:
                self.cache.bundle_data.note_deleted(bundle)

    def shadow(self) -> LoadView:
        """A detached deep copy to refresh and plan on (a dry run): what happens to it, including
        long-term data it adopts, is never seen by this view nor reported to ``on_adopt``."""
        copy = LoadView(cluster=self.cluster)
        # The watch cache is shared, not copied: it only mirrors ZooKeeper (under its own lock), and
        # a second cache would re-read the whole cluster and set its watches again for one dry run.
        copy.cache = self.cache
        copy._cache_lock = self._cache_lock
        copy.overlay = self.overlay
        copy.owners_elsewhere = self.owners_elsewhere
        copy.load = self.load.model_copy(deep=True)
        copy.ctx = deepcopy(self.ctx)
        copy.cordoned = self.cordoned
        copy.known_brokers = set(self.known_brokers)
        copy.bundle_data_versions = dict(self.bundle_data_versions)
        copy.reports = self.reports.copy()
        copy.folded = dict(self.folded)
        copy._data_cursor = self._data_cursor
        copy._forgot = self._forgot
        copy.last = self.last
        return copy

    def expected_version(self, bundle: str) -> int:
        """The version a compare-and-set write of ``bundle``'s node must present (-1: no node)."""
        return self.bundle_data_versions.get(bundle, -1)

    def wrote(self, bundle: str, version: int) -> None:
        self.bundle_data_versions[bundle] = version
        data = self.load.bundle_data.get(bundle)
        if self.cache is not None and data is not None:
            # Packed: a copy by value (the view's own object keeps taking samples after the write).
            with self.cache.lock:
                self.cache.bundle_data.note_written(bundle, pack(data), version)

    def seeded(self, bundle: str, version: int | None) -> None:
        """``bundle`` entered ``load.bundle_data`` from its stored node at ``version`` (None: no node):
        the next refresh must see that node as already known, not as another writer's change."""
        self.bundle_data_versions[bundle] = -1 if version is None else version

    def forget(self, bundle: str) -> None:
        """Drop a bundle (e.g. a split parent): if it comes back it is seeded again from the store."""
        if self.load.bundle_data.pop(bundle, None) is not None:
            self._forgot = True
        self.bundle_data_versions.pop(bundle, None)

    def refresh(
        self,
        store: ZkStore,
        now_ms: int,
        strategies: tuple[LoadSheddingStrategy, PlacementStrategy],
    ) -> Snapshot:
        # Bundle data comes from the watch cache on every refresh: the first reconcile after a
        # failover places orphans with their history, not with defaults.
        snap = self.snapshot(store, now_ms, bundle_data=True)
        cache = self.cache_for(store)
        with cache.lock:  # the nodes changed up to the snapshot's read, not any synced since
            touched = cache.bundle_data.changes_since(self._data_cursor, snap.bundle_data_mark)
        self._data_cursor = snap.bundle_data_mark
        report_versions = snap.report_versions
        brokers = snap.brokers
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
        snap.adopted_long_term = self._adopt_external(snap, touched)
        keys = {b: (report_versions.get(b, -1), local.last_update) for b, local in brokers.items()}
        snap.folded = sorted(b for b, key in keys.items() if self.folded.get(b) != key)
        left = [b for b in self.reports.bundles_of if b not in current]
        folded = fold_reports(
            self.load, self.reports, snap.folded, left, snap.stored_bundle_data, snap.quotas, self._forgot
        )
        self._forgot = False
        # Adopted long-term windows count in their brokers' totals now, not at their next report.
        refresh_time_averages(self.load, snap.adopted_long_term, folded.recomputed)
        self.folded = keys
        for bundle in folded.seeded:  # first sight: seeded from this read
            self.bundle_data_versions[bundle] = snap.bundle_data_versions.get(bundle, -1)
        for bundle in folded.dropped:
            self.bundle_data_versions.pop(bundle, None)
        snap.dropped_bundles = folded.dropped
        self.ctx.available_brokers = sorted(current)
        self.ctx.cordoned = self.cordoned
        snap.policies.apply_to(self.ctx)
        self.ctx.refresh(self.load, changed=snap.folded)
        self.last = snap
        return snap

    def _adopt_external(self, snap: Snapshot, touched: set[str] | None) -> list[str]:
        """Take ``longTermData`` from each held bundle's node that another writer changed since we
        saw it; ``touched``: the nodes changed since the last refresh (None: look at all)."""
        adopted: list[str] = []
        versions = self.bundle_data_versions
        node_versions = snap.bundle_data_versions
        held = self.load.bundle_data
        candidates = held.items() if touched is None else ((b, held[b]) for b in touched if b in held)
        for bundle, data in candidates:
            version = node_versions.get(bundle)
            if version is None:
                versions[bundle] = -1  # node deleted: the next write creates it again
                continue
            known = versions.get(bundle)
            if known == version:
                continue
            versions[bundle] = version
            value = snap.stored_bundle_data.get(bundle)
            if value is None:  # a malformed node has nothing to adopt; the next write repairs it
                continue
            data.long_term_data = value.long_term_data.model_copy(deep=True)
            if known is None:
                # Held without ever having seen its node (placed before the node was read, e.g. by
                # the first reconcile after a failover): a first sight, not another writer's change.
                continue
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


def _snapshot_of(cache: ClusterCache, now_ms: int, bundle_data: bool, cluster: str) -> Snapshot:
    """The cache's current picture (the caller holds ``cache.lock``); ``cluster`` as ``LoadView``'s."""
    snap = Snapshot(
        time_ms=now_ms,
        brokers=dict(cache.brokers.values),
        layouts=cache.layouts_now(),
        owners=dict(cache.owners.values),
        assignments=dict(cache.assignments.values),
        owner_versions=dict(cache.owners.versions),
    )
    if bundle_data:
        # Anti-affinity groups of namespaces with a readable layout only, as the layouts list them.
        snap.policies = cache.policies.current(cluster, sorted(snap.layouts))
        snap.stored_bundle_data = StoredBundles(dict(cache.bundle_data.values))
        snap.bundle_data_versions = dict(cache.bundle_data.versions)
        snap.report_versions = dict(cache.brokers.versions)
        snap.bundle_data_mark = cache.bundle_data.mark()
        legacy = P.RESOURCE_QUOTA_LEGACY[len(P.RESOURCE_QUOTA) + 1 :] + "/"
        snap.quotas = dict(cache.legacy_quotas.values)
        snap.quotas.update({b: q for b, q in cache.quotas.values.items() if not b.startswith(legacy)})
    return snap
