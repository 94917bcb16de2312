"""``BundleDataJob``: the leader's bundle-data writer, a mixin of :class:`service.leader.jobs.LeaderJobs`.

Every ``loadBalancerResourceQuotaUpdateIntervalMinutes`` the leader writes the top-K bundles' data
(``/loadbalance/bundle-data``) and every live broker's time averages, as Pulsar's leader broker does,
in fenced compare-and-set batches; nodes of bundles gone from every layout and of dead brokers go.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from balancer.config import LoadBalancerConfig
from balancer.loaddata import top_k_bundles_to_write
from balancer.placement.base import PlacementStrategy
from balancer.shedding.base import LoadSheddingStrategy
from service.errors import StaleWrite
from service.leader.clock import now_ms
from service.leader.load_view import Snapshot
from service.zookeeper import paths as P
from service.zookeeper.session.batch import Op, commit_batches

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.leader.executors import ZkExecutor
    from service.leader.load_view import LoadView
    from service.zookeeper.metadata.store import ZkStore

log = logging.getLogger("service.leader.jobs")  # its lines kept their logger when it moved here


class BundleDataJob:
    if TYPE_CHECKING:
        # Provided by LeaderJobs, the only class this mixes into.
        store: ZkStore
        assigner: ZkExecutor
        view: LoadView
        bundle_data_conflicts: int
        is_leader: Callable[[], bool]

    def write_bundle_data(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> int:
        snap = self.view.refresh(self.store, now_ms(), (shedder, placement))
        if not self.is_leader():
            return 0
        load = self.view.load
        try:
            fence = self.assigner.current_fence()
        except StaleWrite:
            return 0  # leadership ended since the check above
        ops: list[Op] = []
        for bundle in top_k_bundles_to_write(load, config):
            # Compare-and-set: a node the long-term job changed since the refresh above is left as it
            # is; the next refresh adopts its longTermData and the write after that goes through.
            # Fenced on the epoch: a write refused because leadership moved on ends the job.
            path = P.bundle_data_path(bundle)
            version = self.view.expected_version(bundle)
            doc = load.bundle_data[bundle].to_json_dict()
            ops.append(Op.create(path, doc, bundle) if version == -1 else Op.set(path, doc, version, bundle))
        result = commit_batches(self.store, ops, fence)
        for op, version in result.done:
            self.view.wrote(op.key, version)
        if result.fenced_out:
            return len(result.done)
        conflicts = [op.key for op, _ in result.refused]
        if conflicts:
            self.bundle_data_conflicts += len(conflicts)
            log.info(
                "bundle data of %d bundle(s) changed by another writer, e.g. %s; not overwritten",
                len(conflicts),
                conflicts[0],
            )
        self._write_time_averages(snap, fence)
        # Unlike Pulsar, a bundle in transit keeps its node: only bundles gone from every layout lose it.
        live = snap.live_bundles()
        dead = [Op.delete(P.bundle_data_path(b), -1, b) for b in snap.bundle_data_versions if b not in live]
        for op, _ in commit_batches(self.store, dead, fence).done:
            self.view.deleted_bundle_data(op.key)
        return len(result.done)

    def _write_time_averages(self, snap: Snapshot, fence: Any) -> None:
        """Every live broker's TimeAverageBrokerData written, dead brokers' nodes removed, in batches."""
        existing = set(self.store.children(P.TIME_AVERAGE))
        ops = [
            Op.set(P.time_average_path(b), d.time_average_data.to_json_dict(), -1, b)
            if b in existing
            else Op.create(P.time_average_path(b), d.time_average_data.to_json_dict(), b)
            for b, d in self.view.load.broker_data.items()
        ]
        gone = [b for b in existing if b not in snap.brokers]
        if gone:
            # A broker that registered after the snapshot has a fresh node here too: only a broker
            # gone from both the snapshot and the registrations read now loses its time average.
            registered = set(self.store.broker_ids())
            ops += [Op.delete(P.time_average_path(b), -1, b) for b in gone if b not in registered]
        commit_batches(self.store, ops, fence)
