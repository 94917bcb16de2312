"""The leader's periodic work, one method per APScheduler job, plus the moves they share. Mixed into
``LeaderJobs``: the split job and manual splits (:mod:`service.leader.split_jobs`), the bundle-data
writer (:mod:`service.leader.bundle_data_job`), plan / write / apply (:mod:`service.leader.write_window`)
and Pulsar mode's look at where each move landed (:mod:`service.leader.pulsar_moves`).

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
from balancer.cycle import CyclePlan, Move, plan_shedding_cycle
from balancer.explain import Explanation, explain
from balancer.placement.base import PlacementStrategy, batch_order
from balancer.placement.pipeline import assign_bundle
from balancer.shedding.base import LoadSheddingStrategy
from service.errors import ServiceError, StaleWrite
from service.leader.bundle_data_job import BundleDataJob
from service.leader.clock import now_ms
from service.leader.cluster_view import DecisionLog, DecisionRecord
from service.leader.executors import Executor, ZkExecutor
from service.leader.load_view import LoadView, Snapshot
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


class LeaderJobs(SplitJobs, BundleDataJob, WriteWindow, PulsarMoveCheck):
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
        self._cycle_sources: set[str] = set()  # brokers that shed in the current cycle
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
        self._pending_moves = {}  # see PulsarMoveCheck
        self.reissued_moves = 0

    @property
    def zk_native(self) -> bool:
        return isinstance(self.executor, ZkExecutor)

    def _record(self, kind: Any, explanation: Explanation, **kw: Any) -> DecisionRecord:
        explanation.numbers.setdefault("leaderEpoch", self.epoch())
        record = self.decisions.add(now_ms(), kind, explanation, **kw)
        # Each move goes into the history with its kind, so a replay tells the leader's from an operator's.
        if self.history is not None and record.bundle and hasattr(self.history, "append_decision"):
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
        else:
            self._check_moves(snap, now)
        if not self.is_leader():
            return None
        reconciled = time.monotonic()
        plan = plan_shedding_cycle(self.view.load, config, shedder, placement, self.view.ctx, now, self.rng)
        decided = time.monotonic()
        planner = plan.shedding.summary.numbers.get("plannerSeconds")
        if isinstance(planner, (int, float)):
            self.metrics.planner_time(float(planner))
        self._cycle_sources = set()
        unlocked_before = self.unlocked_s
        if isinstance(self.executor, ZkExecutor):
            applied = self._apply_moves_batched(plan, snap)
        else:
            applied = self._apply_moves(plan)
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
            "shedding cycle: %d move(s) planned, %d applied; %s (write: the lock let go, recording included)",
            len(plan.moves),
            applied,
            phases,
        )
        # Pulsar's doLoadShedding counts what it unloaded, not what the strategy proposed.
        self.metrics.shedding_unloads(len(self._cycle_sources), applied)
        self.last_plan = plan
        self.cycles += 1
        if self.history is not None:
            self.history.append_cycle(now, self.view.load, snap.owner_map())
        self.metrics.cycle_finished(time.monotonic() - started, applied)
        return plan

    def _apply_moves(self, plan: CyclePlan) -> int:
        """One executor call per move (a remote admin API): stop at the first fenced refusal.

        Pulsar's unload answers once the bundle's topics are closed, a second or more each: the
        service lock is let go for each call (the bundle in flight), so operators and REST never wait
        for a cycle's unloads."""
        applied = 0
        for move in plan.moves:
            if not self.is_leader():
                log.warning("leadership lost mid-cycle; %s stays on %s", move.bundle, move.source)
                self.view.load.recently_unloaded_bundles.pop(move.bundle, None)
                break
            if move.bundle in self.in_flight:
                self._refused(move, "an operator's unload or split of it is under way", quiet=True)
                continue
            try:
                with self._writing((move.bundle,)):
                    self.executor.unload(move.bundle, move.source, move.destination, move.explanation.reason)
            except ServiceError as e:
                self._refused(move, str(e))
                if isinstance(e, StaleWrite):
                    break
                continue
            applied += 1
            self._applied(move)
        return applied

    def _apply_moves_batched(self, plan: CyclePlan, snap: Snapshot) -> int:
        """All moves of the cycle in fenced, pipelined batches (compare-and-set on each assignment)."""
        if not plan.moves:
            return 0
        moves = {m.bundle: m for m in plan.moves}
        failed: ServiceError | None = None
        if not self.is_leader():
            failed = StaleWrite("leadership lost before the moves were written")
        else:
            with self._writing(moves):
                try:
                    result = self.assigner.unload_many(
                        ((m.bundle, m.source, m.destination, m.explanation.reason) for m in plan.moves),
                        snap.assignments,
                    )
                except ServiceError as e:
                    failed = e
                else:
                    # Still with the lock let go: what was written goes into the watch cache (its own
                    # lock) and the decision log, history and metrics (their own locks); a second
                    # at 30,000 moves that an operator's request no longer waits for.
                    for op, version in result.done:
                        move = moves[op.key]
                        self._applied(move)
                        data = op.data if op.kind != "delete" else None
                        self.view.wrote_assignment(move.bundle, data, version)
        if failed is not None:  # under the lock again: the view's recently-unloaded map
            for move in plan.moves:
                self._refused(move, str(failed), quiet=True)
            log.warning("%d move(s) not written: %s", len(plan.moves), failed)
            return 0
        for op, why in result.refused:
            self._refused(moves[op.key], why, quiet=True)
        if result.refused:
            log.warning(
                "%d of %d move(s) refused (%s), e.g. %s",
                len(result.refused),
                len(plan.moves),
                "leadership lost" if result.fenced_out else result.refused[0][1],
                result.refused[0][0].key,
            )
        log.info(
            "%d move(s) written in %d transaction(s), %d round(s)",
            len(result.done),
            result.transactions,
            result.rounds,
        )
        return len(result.done)

    def _applied(self, move: Move) -> None:
        self._cycle_sources.add(move.source)
        self._expect_move(move.bundle, move.destination, move.explanation.reason, now_ms())
        self._record(
            "shedding", move.explanation, bundle=move.bundle, source=move.source, destination=move.destination
        )
        self.metrics.unloaded(move.explanation.reason)

    def _refused(self, move: Move, why: str, quiet: bool = False) -> None:
        self.view.load.recently_unloaded_bundles.pop(move.bundle, None)
        self._record(
            "shedding",
            move.explanation,
            bundle=move.bundle,
            source=move.source,
            destination=move.destination,
            applied=False,
        )
        if not quiet:
            log.warning("move of %s refused: %s", move.bundle, why)

    # ---- orphans -----------------------------------------------------------------------------------
    def reconcile(
        self, config: LoadBalancerConfig, shedder: LoadSheddingStrategy, placement: PlacementStrategy
    ) -> int:
        now = now_ms()
        snap = self.view.refresh(self.store, now, (shedder, placement))
        if not self.zk_native:
            self._check_moves(snap, now)
            return 0
        return self._reconcile(snap, config, placement)

    def _reconcile(self, snap: Snapshot, config: LoadBalancerConfig, placement: PlacementStrategy) -> int:
        """Give every unowned bundle whose assignment is missing or names a dead broker a live broker."""
        live = snap.live_bundles()
        stale = [
            Op.delete(P.assignment_path(b), got.version, key=b)
            for b, got in sorted(snap.assignments.items())
            if b not in live and b not in self.in_flight  # left over from a split or a deleted namespace
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
        unplaced = [
            b
            for b in sorted(live)
            if b not in snap.owners
            and b not in self.in_flight  # a cycle's write of it is under way
            # An assigned broker that is alive has not taken it yet.
            and ((a := snap.assignments.get(b)) is None or a.value.broker not in snap.brokers)
        ]
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
        suspects = [b for b in sorted(live) if b in snap.owner_versions and b not in snap.owners]
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
