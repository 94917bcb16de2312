"""``ManualOperations``: what an operator asks of the leader — unload, split, and a lookup that assigns.

A mixin of :class:`service.leader.service.LoadManagerService`, kept in its own module so ``service.py``
stays under the ~400-line guideline. Each operation runs on the leader only, under the service lock,
over a fresh refresh of the view, and is logged beside the jobs' decisions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from balancer.bundles import namespace_of, split_bundle_name, topic_namespace
from balancer.errors import Conflict, UnknownBroker, UnknownBundle
from balancer.explain import Explanation, explain
from balancer.placement.pipeline import select_broker
from service.errors import AdminRequired, BundleBusy, NotLeader, StoreUnavailable
from service.leader.clock import now_ms
from service.leader.cluster_view import DecisionRecord
from service.leader.move_queue import MoveRequest

if TYPE_CHECKING:
    import threading

    from balancer.config import LoadBalancerConfig
    from balancer.placement.base import PlacementStrategy
    from balancer.shedding.base import LoadSheddingStrategy
    from service.leader.cluster_view import DecisionLog
    from service.leader.election import LeaderElection
    from service.leader.executors import Executor
    from service.leader.jobs import LeaderJobs
    from service.leader.load_view import LoadView
    from service.leader.metrics_sink import MetricsSink
    from service.zookeeper.metadata.store import ZkStore

# The service's logger, as before these moved here: log settings keyed on its name still apply.
log = logging.getLogger("service.leader.service")
# How long an operator's unload or split waits for one of the same bundle under way (Pulsar mode):
# Pulsar's unload answers in seconds; its split and the read-back take up to about 10 s more.
BUSY_WAIT_S = 30.0


class ManualOperations:
    """``unload``, ``split`` and ``lookup``; the state they use is the service's."""

    if TYPE_CHECKING:
        # Provided by LoadManagerService, the only class this mixes into.
        instance_id: str
        store: ZkStore
        election: LeaderElection
        executor: Executor
        jobs: LeaderJobs
        metrics: MetricsSink
        _lock: threading.RLock
        _config: LoadBalancerConfig
        _shedder: LoadSheddingStrategy
        _placement: PlacementStrategy
        _loadview: LoadView
        _decisions: DecisionLog

        def is_leader(self) -> bool: ...

        def leader_info(self) -> dict[str, Any] | None: ...

        def _publish_leader_state(self) -> None: ...

        def _require_may_act(self) -> None: ...

        def _pulsar_lookup(self, topic: str, assign: bool = True) -> str | None: ...

    # ---- mutations (leader only) -------------------------------------------------------------------
    def _require_leader(self) -> None:
        if not self.is_leader():
            try:
                url, why, info = self.election.verified_leader()
            except StoreUnavailable:
                raise NotLeader(None) from None
            if info is not None and info.get("brokerId") == self.instance_id:
                raise NotLeader(None)  # our own stale node: no one else to send the caller to
            # Only a verified leader is offered to the REST layer, which forwards the caller's token:
            # its node's signature matches the session owning it and the current epoch.
            if url is None and info is not None:
                log.warning("not forwarding to the leader node's address: %s (node: %r)", why, info)
                raise NotLeader(None, f"this instance is not the leader and will not forward: {why}")
            raise NotLeader(url)

    def _require_idle(self, bundle: str) -> None:
        """Pulsar mode: one unload or split of a bundle at a time. Pulsar's admin API would take a
        second one mid-move and answer it or not depending on timing; ZooKeeper-native writes are
        compare-and-set, so there the second simply loses. The operator's request waits (the lock let
        go) for the one under way, up to :data:`BUSY_WAIT_S`, then goes ahead on what it left."""
        if not self.executor.remote_split:
            return
        deadline = time.monotonic() + BUSY_WAIT_S
        while bundle in self.jobs.in_flight:
            if time.monotonic() >= deadline:
                raise BundleBusy(
                    f"{bundle}: an unload or split of it has been under way for over {BUSY_WAIT_S:.0f} s; "
                    "ask again when it is done"
                )
            with self.jobs.unlocked():
                time.sleep(0.05)
        self._require_leader()

    def unload(
        self, bundle: str, destination: str | None = None, principal: str | None = None
    ) -> DecisionRecord:
        """Move ``bundle`` to ``destination`` (a live broker), or wherever placement puts it."""
        self._require_leader()
        if destination is not None and not self.executor.remote_split:
            return self._unload_to(bundle, destination, principal)
        with self._lock:
            self._require_idle(bundle)  # before the snapshot: it reads what the one under way left
            now = now_ms()
            snap = self._loadview.refresh(self.store, now, (self._shedder, self._placement))
            if bundle not in snap.live_bundles():
                raise UnknownBundle(bundle)
            owner = snap.owners.get(bundle)
            source = owner.broker if owner else None
            if destination is not None and destination not in snap.brokers:
                raise UnknownBroker(destination)
            _refuse_unload_to_owner(bundle, source, destination)
            placed = None
            if destination is None and not self.executor.remote_split:
                placed = select_broker(
                    bundle,
                    self._loadview.load,
                    self._config,
                    self._placement,
                    self._loadview.ctx,
                    self.jobs.rng,
                )
                destination = placed.broker if placed.broker != source else None
            why = _unload_why(
                bundle, source, destination, placed.explanation.reason if placed else None, principal
            )
            self._require_may_act()
            # Pulsar's unload answers once the bundle's topics are closed: the lock is let go
            # meanwhile (the bundle in flight), so the leader's jobs and REST go on.
            with self.jobs._writing((bundle,)):
                self.executor.unload(bundle, source, destination, why.reason)
            # Not recorded as recently unloaded: Pulsar's admin unload leaves the leader's
            # recentlyUnloadedBundles alone (only its own shedding records there), so an operator's
            # move does not exempt the bundle from shedding for the grace period.
            self._publish_leader_state()
            self.metrics.unloaded(why.reason)
            return self._manual_move(bundle, source, destination, why, principal)

    def _unload_to(self, bundle: str, destination: str, principal: str | None) -> DecisionRecord:
        """ZooKeeper-native unload to a named broker, without the service lock: it needs no load data
        (no placement), only this bundle's own nodes and the broker list, read afresh (as a lookup
        reads them), and one fenced write. A running cycle (deciding 30,000 moves at 100k bundles
        holds the lock for seconds) never delays it; a cycle's own move of the same bundle is
        compare-and-set on the version it read, so it loses to this write whichever lands first."""
        ns = namespace_of(bundle)
        layout = self.store.read_layout(ns)
        if layout is None or bundle not in layout.value.bundle_names:
            raise UnknownBundle(bundle)
        if destination not in self.store.broker_ids():
            raise UnknownBroker(destination)
        owner = self.store.read_owner(bundle)
        source = owner.broker if owner else None
        _refuse_unload_to_owner(bundle, source, destination)
        why = _unload_why(bundle, source, destination, None, principal)
        self._require_may_act()
        self._require_leader()
        self.executor.unload(bundle, source, destination, why.reason)
        # As the locked path: not recorded as recently unloaded (Pulsar's admin unload is not).
        self.metrics.unloaded(why.reason)
        return self._manual_move(bundle, source, destination, why, principal)

    def _manual_move(
        self,
        bundle: str,
        source: str | None,
        destination: str | None,
        why: Explanation,
        principal: str | None,
    ) -> DecisionRecord:
        """Record an operator's unload, written now, and follow it in the move queue until served
        (service/leader/move_tick.py): it counts against the in-flight caps meanwhile, its time to
        served goes to the histogram, and in Pulsar mode it is unloaded again to its destination if
        Pulsar placed it elsewhere (service/leader/pulsar_moves.py)."""
        now = now_ms()
        record = self.jobs._record(
            "manual",
            why,
            bundle=bundle,
            source=source,
            destination=destination,
            principal=principal,
            state="in_flight",
            released_ms=now,
        )
        self.jobs.track_manual(MoveRequest(bundle, source, destination, why), record, now)
        return record

    def split(
        self,
        bundle: str,
        algorithm: str | None = None,
        positions: Sequence[int] | None = None,
        principal: str | None = None,
        unload: bool = False,
    ) -> DecisionRecord:
        """Split ``bundle`` with Pulsar's ``algorithm`` (default: the configured one); ``unload``
        also unloads the children, as ``pulsar-admin namespaces split-bundle -u`` (off by default)."""
        self._require_leader()
        with self._lock:
            self._require_idle(bundle)
            split_bundle_name(bundle)
            snap = self._loadview.refresh(self.store, now_ms(), (self._shedder, self._placement))
            why = explain(
                "manual_split",
                f"operator split of {bundle}",
                subject=bundle,
                algorithm=algorithm,
                principal=principal,
            )
            self._require_may_act()
            record = self.jobs.split(
                bundle,
                algorithm,
                positions,
                self._config,
                snap,
                why,
                unload=unload,
                strategies=(self._shedder, self._placement),
            )
            self._publish_leader_state()
            return record

    def lookup(self, topic: str, assign: bool = True, principal: str | None = None) -> str:
        """The broker serving ``topic``'s bundle; an unowned bundle is assigned through placement first.

        ``assign=False`` (a caller without the admin role) answers owned bundles only: assigning
        writes, so it raises AdminRequired instead.
        """
        pulsar = self._pulsar_lookup(topic, assign)
        if pulsar is not None:
            return pulsar  # Pulsar mode: the owner, or (an admin's lookup) Pulsar's own, which may assign
        ns = topic_namespace(topic)
        got = self.store.read_layout(ns)
        if got is None:
            raise UnknownBundle(f"namespace {ns} has no bundle layout")
        bundle = got.value.find_bundle(topic)
        # This bundle's own nodes only: a lookup must not read every bundle of the cluster.
        owner = self.store.read_owner(bundle)
        if owner is not None:
            return owner.broker
        assigned = self.store.read_assignment(bundle)
        if assigned is not None and assigned.value.broker in self.store.broker_ids():
            return assigned.value.broker
        if not assign:
            raise AdminRequired(f"{bundle} has no owner; assigning it through a lookup needs the admin role")
        self._require_leader()
        with self._lock:
            snap = self._loadview.refresh(self.store, now_ms(), (self._shedder, self._placement))
            self.jobs._reconcile(snap, self._config, self._placement)
        assigned = self.store.read_assignment(bundle)
        if assigned is None:
            raise UnknownBroker(f"no live broker can take {bundle}")
        # the placement itself is logged by reconcile; this says whose lookup caused it
        why = explain(
            "lookup_assigned",
            f"lookup of {topic} assigned {bundle} to {assigned.value.broker}",
            subject=bundle,
            principal=principal,
        )
        self._decisions.add(now_ms(), "manual", why, bundle=bundle, destination=assigned.value.broker)
        return assigned.value.broker


def _unload_why(
    bundle: str, source: str | None, destination: str | None, placement: str | None, principal: str | None
) -> Explanation:
    """The explanation an operator's unload is recorded with, whichever path carried it out."""
    return explain(
        "manual_unload",
        f"operator unload of {bundle}" + (f" to {destination}" if destination else " (placement decides)"),
        subject=bundle,
        source=source,
        destination=destination,
        placement=placement,
        principal=principal,
    )


def _refuse_unload_to_owner(bundle: str, source: str | None, destination: str | None) -> None:
    """An unload to the broker that owns the bundle would move nothing, yet be recorded and followed
    as a move "B -> B" (and in Pulsar mode close the bundle's topics for nothing). Pulsar's Extensible
    load manager refuses a transfer to the current owner as well; refused before anything is written."""
    if destination is not None and destination == source:
        raise Conflict(
            "destinationBroker",
            destination,
            f"bundle {bundle} is already owned by {destination}: an unload to its current owner would "
            "move nothing; name another broker, or leave the destination out to let placement choose",
        )
