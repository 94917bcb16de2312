"""A large synthetic cluster written straight into ZooKeeper, node for node as agents would write it.

For scale tests and ``bench/live_scale.py``: thousands of simulated agents as real processes would
not fit this machine, so brokers share ZooKeeper sessions (``brokers_per_session`` each). Each
session holds its brokers' ephemeral reports (``/loadbalance/brokers/<id>``) and ownership nodes
(``/namespace/<bundle>``), so closing it is those brokers dying; layouts, assignments and bundle
data are persistent. Bundles start on the first ``loaded_fraction`` of the brokers, which run hot,
and the others run idle: the shape a shedding cycle has real work on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from balancer.bundles import NamespaceBundles
from balancer.models import BundleData, LocalBrokerData, NamespaceBundleStats, ResourceUsage
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Assignment, ZkStore
from service.zookeeper.session.batch import Op, commit_batches


@dataclass
class Group:
    """One session and the brokers it keeps alive."""

    store: ZkStore
    brokers: list[str]


class SyntheticCluster:
    """``brokers`` brokers, ``bundles`` bundles over ``namespaces`` namespaces, on ``hosts``."""

    def __init__(
        self,
        hosts: str,
        brokers: int,
        bundles: int,
        namespaces: int,
        loaded_fraction: float = 0.5,
        brokers_per_session: int = 10,
        seed: int = 1,
        session_timeout_s: float = 10.0,
    ) -> None:
        if brokers < 1 or bundles < namespaces or namespaces < 1:
            raise ValueError(f"need brokers >= 1 and bundles >= namespaces >= 1: {brokers=}, {bundles=}")
        self.hosts = hosts
        self.rng = random.Random(seed)
        self.session_timeout_s = session_timeout_s
        self.admin = ZkStore(hosts, session_timeout_s=session_timeout_s)
        self.admin.start()
        self.groups: list[Group] = []
        self.group_of: dict[str, Group] = {}
        self.owner_of: dict[str, str] = {}
        self.stats: dict[str, NamespaceBundleStats] = {}
        self._brokers_per_session = brokers_per_session
        self._next_broker = 0
        self.namespaces = [f"scale/ns{i:04d}" for i in range(namespaces)]
        self._per_ns = bundles // namespaces
        self._loaded = max(1, int(brokers * loaded_fraction))
        self._initial_brokers = brokers

    # ---- population -------------------------------------------------------------------------------
    def populate(self) -> None:
        """Layouts, brokers, assignments, bundle data, then ownership and reports per session."""
        names: list[str] = []
        for ns in self.namespaces:
            layout = NamespaceBundles.initial(ns, self._per_ns)
            self.admin.put_json(P.policies_path(ns), {"bundles": layout.to_policies()})
            names.extend(layout.bundle_names)
        brokers = self.add_brokers(self._initial_brokers, report=False)
        loaded = brokers[: self._loaded]
        for i, bundle in enumerate(names):
            self.owner_of[bundle] = loaded[i % len(loaded)]
            self.stats[bundle] = self._bundle_stats()
        ops = [
            op
            for b, o in self.owner_of.items()
            for op in (
                Op.create(P.assignment_path(b), ZkStore.assignment_doc(Assignment(o, None, "populate", 0))),
                Op.hint(o, b),
            )
        ]
        ops += [Op.create(P.bundle_data_path(b), self._bundle_data(b).to_json_dict()) for b in names]
        self._commit(self.admin, ops)
        by_group: dict[int, list[Op]] = {}
        for bundle, broker in self.owner_of.items():
            group = self.group_of[broker]
            by_group.setdefault(id(group), []).append(self._ownership_op(bundle, broker))
        for group in self.groups:
            self._commit(group.store, by_group.get(id(group), []))
            self.write_reports(group.brokers)

    def add_brokers(self, n: int, report: bool = True) -> list[str]:
        """``n`` new brokers on new sessions (a scale-out); returns their ids."""
        added: list[str] = []
        while len(added) < n:
            store = ZkStore(self.hosts, session_timeout_s=self.session_timeout_s)
            store.start()
            count = min(self._brokers_per_session, n - len(added))
            ids = [f"broker-{self._next_broker + i:05d}:8080" for i in range(count)]
            self._next_broker += count
            group = Group(store, ids)
            self.groups.append(group)
            for b in ids:
                self.group_of[b] = group
            if report:
                self.write_reports(ids)
            added.extend(ids)
        return added

    # ---- what agents do -----------------------------------------------------------------------------
    def report(self, broker: str) -> LocalBrokerData:
        owned = sorted(b for b, o in self.owner_of.items() if o == broker)
        return self._report(broker, owned)

    def write_reports(self, brokers: list[str]) -> None:
        """Write (create or overwrite) each broker's report, in its own session, pipelined per session."""
        owned: dict[str, list[str]] = {b: [] for b in brokers}
        for bundle, broker in self.owner_of.items():
            if broker in owned:
                owned[broker].append(bundle)
        per_group: dict[int, tuple[Group, list[Op]]] = {}
        for broker in brokers:
            group = self.group_of[broker]
            doc = self._report(broker, sorted(owned[broker])).to_json_dict()
            path = P.broker_path(broker)
            exists = group.store.client.exists(path) is not None
            op = Op.set(path, doc) if exists else Op.create(path, doc, ephemeral=True)
            per_group.setdefault(id(group), (group, []))[1].append(op)
        for group, ops in per_group.values():
            self._commit(group.store, ops)

    def follow_assignments(self) -> int:
        """Agents' reconcile: release bundles assigned elsewhere, take the ones assigned to them."""
        live = {b for got in self.admin.read_layouts().values() for b in got.value.bundle_names}
        assigned = {b: a.value.broker for b, a in self.admin.read_assignments().items() if b in live}
        owners = {b: o.broker for b, o in self.admin.read_owners().items()}
        moved = 0
        touched: set[str] = set()
        for bundle, broker in assigned.items():
            current = owners.get(bundle)
            if current == broker or broker not in self.group_of:
                continue
            if current is not None and current in self.group_of:
                self.group_of[current].store.delete(P.ownership_path(bundle))
                touched.add(current)
            self._commit(self.group_of[broker].store, [self._ownership_op(bundle, broker)])
            self.owner_of[bundle] = broker
            self.stats.setdefault(bundle, self._bundle_stats())
            touched.add(broker)
            moved += 1
        for bundle in [b for b in self.owner_of if b not in live]:
            broker = self.owner_of.pop(bundle)
            if broker in self.group_of:
                self.group_of[broker].store.delete(P.ownership_path(bundle))
                touched.add(broker)
        self.write_reports(sorted(b for b in touched if b in self.group_of))
        return moved

    def kill_group(self, group: Group) -> list[str]:
        """Close one session: its brokers' reports and ownership nodes vanish, as when they die."""
        group.store.stop()
        self.groups.remove(group)
        for b in group.brokers:
            del self.group_of[b]
        for bundle in [b for b, o in self.owner_of.items() if o in group.brokers]:
            del self.owner_of[bundle]
        return group.brokers

    def close(self, purge: bool = True) -> None:
        """Kill every session; with ``purge`` also delete the persistent nodes, in batches (a
        recursive delete of 100,000 nodes one round trip at a time takes minutes)."""
        for group in self.groups:
            group.store.stop()
        self.groups.clear()
        if purge:
            roots = (P.ASSIGNMENTS, P.BROKER_ASSIGNMENTS, P.BUNDLE_DATA, P.LOCAL_POLICIES, P.OWNERSHIP)
            for root in (*roots, P.TIME_AVERAGE):
                self._purge(root)
        self.admin.stop()

    def _purge(self, root: str) -> None:
        levels: list[list[str]] = [[root]]
        while levels[-1]:
            below = [P.join(d, c) for d in levels[-1] for c in self.admin.children(d)]
            levels.append(below)
        for level in reversed(levels[1:]):
            commit_batches(self.admin, [Op.delete(p) for p in level], None)

    # ---- records --------------------------------------------------------------------------------------
    def _report(self, broker: str, owned: list[str]) -> LocalBrokerData:
        stats = {b: self.stats.setdefault(b, self._bundle_stats()) for b in owned}
        hot = bool(owned)
        local = LocalBrokerData(
            web_service_url=f"http://{broker}",
            cpu=ResourceUsage(usage=(70.0 if hot else 5.0) + self.rng.random() * 10, limit=100.0),
            bandwidth_in=ResourceUsage(usage=10.0 * len(owned), limit=1e6),
            bandwidth_out=ResourceUsage(usage=10.0 * len(owned), limit=1e6),
            memory=ResourceUsage(usage=1000.0, limit=8000.0),
        )
        local.update(local.usages(), stats)
        return local

    def _bundle_stats(self) -> NamespaceBundleStats:
        rate = self.rng.uniform(10.0, 200.0)
        return NamespaceBundleStats(
            msg_rate_in=rate,
            msg_rate_out=rate * 2,
            msg_throughput_in=rate * 1024,
            msg_throughput_out=rate * 2048,
            topics=4,
            producer_count=2,
            consumer_count=2,
        )

    def _bundle_data(self, bundle: str) -> BundleData:
        data = BundleData.default()
        s = self.stats[bundle]
        for window in (data.short_term_data, data.long_term_data):
            window.msg_rate_in, window.msg_rate_out = s.msg_rate_in, s.msg_rate_out
            window.msg_throughput_in, window.msg_throughput_out = s.msg_throughput_in, s.msg_throughput_out
            window.num_samples = 10
        data.topics = s.topics
        return data

    def _ownership_op(self, bundle: str, broker: str) -> Op:
        doc = {
            "brokerId": broker,
            "httpUrl": f"http://{broker}",
            "disabled": False,
            "advertisedListeners": {},
        }
        return Op.create(P.ownership_path(bundle), doc, ephemeral=True)

    @staticmethod
    def _commit(store: ZkStore, ops: list[Op]) -> None:
        result = commit_batches(store, ops, None)
        if result.refused:
            op, why = result.refused[0]
            raise RuntimeError(f"populating {op.path} failed: {why} ({len(result.refused)} refused)")
