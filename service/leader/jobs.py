"""The leader's periodic work, one method per APScheduler job, plus the moves they share. Mixed into
``LeaderJobs``: the split job and manual splits (:mod:`service.leader.split_jobs`), the bundle-data
writer (:mod:`service.leader.bundle_data_job`), plan / write / apply (:mod:`service.leader.write_window`),
the paced move queue and its tick (:mod:`service.leader.move_tick`) and Pulsar mode's second unload of
a move Pulsar placed elsewhere (:mod:`service.leader.pulsar_moves`).

A shedding cycle no longer writes its plan at once: it submits it to the move queue, which releases
the moves the disruption budget allows now (``balancer/pacing.py``) and the rest at later ticks.

Every job runs under the service lock: it takes one snapshot (from the watch cache, which the
service brings up to date before taking the lock), decides purely with ``balancer``, then writes
in fenced batches (:mod:`service.zookeeper.session.batch`); before writing it re-checks leadership, and
every write is fenced on the leader epoch (see ``docs/ownership.md``), so a job that outlives its
leadership writes nothing. While it waits for its writes (ZooKeeper batches, or Pulsar's admin API)
the lock is let go and the bundles concerned are in flight; deciding is still done under the lock.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from balancer.config import LoadBalancerConfig
from balancer.cycle import CyclePlan, plan_shedding_cycle
from balancer.explain import Explanation, explain
from balancer.placement.base import PlacementStrategy, batch_order
from balancer.placement.pipeline import assign_bundle
from balancer.shedding.base import LoadSheddingStrategy
from service.leader.bundle_data_job import BundleDataJob
from service.leader.clock import now_ms
from service.leader.cluster_view import DecisionLog, DecisionRecord
from service.leader.executors import Executor, ZkExecutor
from service.leader.load_view import LoadView, Snapshot
from service.leader.move_tick import PacedMoves
from service.leader.pulsar_moves import PulsarMoveCheck
from service.leader.split_jobs import SplitJobs
from service.leader.write_window import WriteWindow
from service.zookeeper import paths as P
from service.zookeeper.metadata.records import parse_assignment
from service.zookeeper.metadata.store import Assignment, ZkStore
from service.zookeeper.session.batch import Op, commit_batches

if TYPE_CHECKING:
    from service.leader.metrics_sink import MetricsSink

log = logging.getLogger(__name__)


class LeaderJobs(SplitJobs, BundleDataJob, WriteWindow, PacedMoves, PulsarMoveCheck):
    """Shedding cycle, orphan reconciliation, bundle-data writer and (``SplitJobs``) split, for one leader."""

    def __init__(
        self,
        store: ZkStore,
        executor: Executor,
        assigner: ZkExecutor,
        view: LoadView,
        decisions: DecisionLog,
        metrics: MetricsSink,
        history: Any,
        is_leader: Callable[[], bool],
        epoch: Callable[[], int | None],
        rng: random.Random,
    ) -> None:
        self.store = store
        self.executor = executor
        self.assigner = assigner
        self.view = view
        self.decisions = decisions
        self.metrics = metrics
        self.history = history
        self.is_leader = is_leader
        self.epoch = epoch
        self.rng = rng
        self.last_plan: CyclePlan | None = None
        self.cycles = 0
        self.bundle_data_conflicts = 0
        self.poison_owners_removed = 0
        self.hints_resent = 0
        # Plan / write / apply: a job plans and applies under the service lock, but waits for its
        # ZooKeeper batches inside ``unlocked()`` (the service sets it: the lock let go meanwhile),
        # so manual operations, REST and the other jobs never wait for a cycle's writes. The
        # bundles being written are ``in_flight``: no other job plans them meanwhile; every write
        # is compare-and-set, so a manual write that lands first makes the cycle's write refused.
        self.unlocked: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
        self.in_flight: frozenset[str] = frozenset()
        self.unlocked_s = 0.0  # time spent writing with the service lock let go (see WriteWindow)
        self.last_phases: dict[str, float] = {}
        self._waiting: dict[str, int] = {}  # see WriteWindow._resend_hints
        self.reissued_moves = 0  # see PulsarMoveCheck
        self._init_moves()

    @property
    def zk_native(self) -> bool:
        return isinstance(self.executor, ZkExecutor)

    def _record(
        self, kind: Any, explanation: Explanation, to_history: bool = True, **kw: Any
    ) -> DecisionRecord:
        explanation.numbers.setdefault("leaderEpoch", self.epoch())
        record = self.decisions.add(now_ms(), kind, explanation, **kw)
        # Each move goes into the history with its kind, so a replay tells the leader's from an operator's.
        if (
            to_history
            and self.history is not None
            and record.bundle
            and hasattr(self.history, "append_decision")
        ):
            self.history.append_decision(record)
        return record

    # ---- shedding ----------------------------------------------------------------------------------
    def shedding_cycle(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> CyclePlan | None:
        started = time.monotonic()
        now = now_ms()
        snap = self.view.refresh(self.store, now, (shedder, placement))
        refreshed = time.monotonic()
        if self.zk_native:
            self._reconcile(snap, config, placement)
        self.follow_moves(now)  # what was served since the last tick: the budget as it is now
        if not self.is_leader():
            return None
        reconciled = time.monotonic()
        plan = plan_shedding_cycle(self.view.load, config, shedder, placement, self.view.ctx, now, self.rng)
        decided = time.monotonic()
        planner = plan.shedding.summary.numbers.get("plannerSeconds")
        if isinstance(planner, (int, float)):
            self.metrics.planner_time(float(planner))
        unlocked_before = self.unlocked_s
        # The plan replaces what is still queued of the last one, and goes at the budget's pace: what
        # may go now is written now, the rest at the next ticks (service/leader/move_tick.py).
        self.moves.submit(plan.moves, "shedding")
        applied = self.move_tick(config)
        for e in self.moves.queued():  # not written: the next plans may choose them again
            self.view.load.recently_unloaded_bundles.pop(e.bundle, None)
        ended = time.monotonic()
        writing = self.unlocked_s - unlocked_before
        # Where a cycle's time goes, and how much of it held the service lock (all but the writes):
        # what an operator's unload or split may have waited for.
        self.last_phases = {
            "refresh": refreshed - started,
            "reconcile": reconciled - refreshed,
            "decide": decided - reconciled,
            "write": writing,
            "record": ended - decided - writing,
        }
        phases = ", ".join(f"{k} {v:.2f} s" for k, v in self.last_phases.items())
        log.info(
            "shedding cycle: %d move(s) planned, %d applied, %d queued; %s (write: the lock let go, "
            "recording included)",
            len(plan.moves),
            applied,
            len(self.moves.queued()),
            phases,
        )
        self.last_plan = plan
        self.cycles += 1
        if self.history is not None:
            self.history.append_cycle(now, self.view.load, snap.owner_map())
        self.metrics.cycle_finished(time.monotonic() - started, applied)
        return plan

    # ---- orphans -----------------------------------------------------------------------------------
    def reconcile(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> int:
        now = now_ms()
        snap = self.view.refresh(self.store, now, (shedder, placement))
        if not self.zk_native:
            return 0  # Pulsar's brokers place; the move tick follows where moves landed
        return self._reconcile(snap, config, placement)

    def _reconcile(self, snap: Snapshot, config: LoadBalancerConfig, placement: PlacementStrategy) -> int:
        """Give every unowned bundle whose assignment is missing or names a dead broker a live broker."""
        live = snap.live_bundles()
        # Each list is filtered before it is sorted: 100,000 live bundles sorted to keep a handful.
        stale = [
            Op.delete(P.assignment_path(b), snap.assignments[b].version, key=b)
            for b in sorted(
                b
                for b in snap.assignments
                if b not in live and b not in self.in_flight  # left over from a split or a deleted namespace
            )
        ]
        if stale and self.is_leader():
            gone = commit_batches(self.store, stale, self.assigner.current_fence())
            for op, _ in gone.done:
                self.view.wrote_assignment(op.key, None, -1)
        self._remove_poison_owners(snap, live)
        self._resend_hints(snap, live)
        if not snap.brokers:
            return 0
        ops: list[Op] = []
        planned: dict[str, tuple[Explanation, str | None, str]] = {}
        clock = now_ms()
        # Bundle data comes from the watch cache even on a non-sampling refresh (see LoadView.refresh).
        stored, versions = snap.stored_bundle_data, snap.bundle_data_versions
        unplaced = sorted(
            b
            for b in live
            if b not in snap.owners
            and b not in self.in_flight  # a cycle's write of it is under way
            # An assigned broker that is alive has not taken it yet.
            and ((a := snap.assignments.get(b)) is None or a.value.broker not in snap.brokers)
        )
        for bundle in batch_order(placement, unplaced, self.view.load, stored):
            a = snap.assignments.get(bundle)
            new_to_view = bundle not in self.view.load.bundle_data
            decision = assign_bundle(
                bundle,
                self.view.load,
                config,
                placement,
                self.view.ctx,
                self.rng,
                stored_bundle_data=stored.get(bundle),
            )
            if new_to_view and bundle in self.view.load.bundle_data:
                self.view.seeded(bundle, versions.get(bundle))
            if decision.broker is None:
                continue
            why = explain(
                "orphan_assigned" if a is not None else "new_bundle_assigned",
                f"unowned bundle placed on {decision.broker}"
                + (f" (its assigned broker {a.value.broker} is gone)" if a is not None else ""),
                subject=bundle,
                placement=decision.explanation.reason,
                candidates=len(decision.candidates),
            )
            doc = ZkStore.assignment_doc(Assignment(decision.broker, None, why.reason, clock))
            path = P.assignment_path(bundle)
            ops.append(Op.create(path, doc, bundle) if a is None else Op.set(path, doc, a.version, bundle))
            ops.append(Op.hint(decision.broker, bundle))
            planned[bundle] = (why, None if a is None else a.value.broker, decision.broker)
        if not ops or not self.is_leader():
            return 0
        # Compare-and-set on each assignment: one that changed since the snapshot lost a race.
        fence = self.assigner.current_fence()
        with self._writing(planned):
            result = commit_batches(self.store, ops, fence)
        done = list(result.done)
        # The leader is the only writer of assignments: a node it could not create is either a lost
        # race (left alone) or a malformed node the view skips (replaced at its version, or the
        # bundle would stay unowned for ever).
        poisoned = [
            fix
            for op, _ in result.refused
            if op.kind == "create"
            and (bad := self.store.malformed_version(op.path, parse_assignment)) is not None
            for fix in (Op("set", op.path, op.data, bad, op.key), Op.hint(planned[op.key][2], op.key))
        ]
        if poisoned and self.is_leader():
            done += commit_batches(self.store, poisoned, self.assigner.current_fence()).done
        for op, version in done:
            why, source, broker = planned[op.key]
            self.view.wrote_assignment(op.key, op.data, version)
            self._record("placement", why, bundle=op.key, source=source, destination=broker)
        if result.refused:
            log.info(
                "assignment of %d bundle(s) not written (%s), e.g. %s",
                len(result.refused),
                result.refused[0][1],
                result.refused[0][0].key,
            )
        return len(done)

    def _remove_poison_owners(self, snap: Snapshot, live: set[str]) -> int:
        """Delete, fenced, each live bundle's ownership node that is persistent or unreadable.

        Ownership is an agent's ephemeral node; such a node belongs to no broker, and every agent's
        create would meet it for ever (Pulsar's lock gives up the same way: "already created as
        non-ephemeral"). Each suspect is read again just before: only a node still poison at the
        version read is deleted, so a legitimate ephemeral owner node is never touched.
        """
        suspects = sorted(b for b in live if b in snap.owner_versions and b not in snap.owners)
        ops = [
            Op.delete(P.ownership_path(b), version, key=b)
            for b in suspects
            if (version := self.store.poison_owner_version(b)) is not None
        ]
        if not ops or not self.is_leader():
            return 0
        done = commit_batches(self.store, ops, self.assigner.current_fence()).done
        self.poison_owners_removed += len(done)
        if done:  # one line per reconcile: each node's own line came from the malformed log
            log.warning(
                "removed %d poison ownership node(s) (persistent or malformed) so the bundles can be "
                "owned again, e.g. %s",
                len(done),
                done[0][0].key,
            )
        return len(done)
