"""``LeaderSchedule``: the leader's periodic jobs on one APScheduler, at Pulsar's intervals.

* ``shedding`` every ``loadBalancerSheddingIntervalMinutes``: one snapshot, orphan placement, one
  ``plan_shedding_cycle`` decision, then the moves, each in the bounded decision log;
* ``reconcile`` at half that interval (and, run by the service, right after a new leader's first
  full sync, before any other job: ``LoadManagerService._start_term``): unowned bundles of live
  namespaces get a broker, so a dead broker's bundles are owned again within one shedding interval;
* ``bundle-data`` every ``loadBalancerResourceQuotaUpdateIntervalMinutes``: bundle data (top K) and
  brokers' time averages written;
* ``split`` every shedding interval: Pulsar's split conditions, executed through the executor;
* ``moves`` every :data:`MOVE_TICK_S` (at most the shedding interval): the move tick follows each
  move in flight until served and releases queued moves at the disruption budget's pace
  (:mod:`service.leader.move_tick`); a second, so a plan's moves follow one another as each is served,
  not a shedding interval apart.

Jobs are paused while this instance does not lead. Intervals are minutes, fractions allowed
(0.05 = 3 s); each is floored at 0.2 s.

**Fixed delay, as Pulsar's.** Pulsar's ``LoadSheddingTask`` schedules its next run one shedding
interval after the current run *ends*: a run that outlasts the interval delays the next one; no run
overlaps another and none is dropped. Every job here does the same: while a run goes, its job is
paused, and when it ends the next is due one interval later (at once if :meth:`LeaderSchedule.wake`
asked for it meanwhile). An interval trigger with ``max_instances=1`` instead dropped the runs that
fell due during a long cycle (three behind one 60,000-move cycle at 100,000 bundles).

Every run the scheduler starts, finishes, fails, or does not start (missed, or skipped because the
previous run still ran: kept as a check, fixed delay leaves no way to it) is counted per job
(:attr:`LeaderSchedule.runs`, and ``job_run`` on the metrics sink) and logged in the service's own
words: a line per shedding run started and finished (INFO), the other jobs' runs at DEBUG, and every
run not started at WARNING.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobEvent,
    JobExecutionEvent,
    JobSubmissionEvent,
)
from apscheduler.schedulers.background import BackgroundScheduler

from balancer.config import LoadBalancerConfig
from service.leader.metrics_sink import JOB_NAMES, RUN_OUTCOMES

__all__ = ["JOB_NAMES", "RUN_OUTCOMES", "LeaderSchedule", "job_intervals"]

log = logging.getLogger(__name__)

# What became of a due run (RUN_OUTCOMES): started, then executed or error; or never started
# (missed: due too long ago; max_instances: the previous run of the job was still going).
_OUTCOME = {
    EVENT_JOB_SUBMITTED: "started",
    EVENT_JOB_EXECUTED: "executed",
    EVENT_JOB_ERROR: "error",
    EVENT_JOB_MISSED: "missed",
    EVENT_JOB_MAX_INSTANCES: "max_instances",
}

# APScheduler logs two INFO lines per job run ("Running job", "executed successfully"); four jobs
# every few seconds bury the service's own log. Its warnings (missed runs, job errors) still show.
logging.getLogger("apscheduler").setLevel(logging.WARNING)


MOVE_TICK_S = 1.0


def job_intervals(config: LoadBalancerConfig) -> dict[str, float]:
    """Seconds between runs of each job under ``config``."""
    shed = max(config.loadBalancerSheddingIntervalMinutes * 60, 0.2)
    return {
        "shedding": shed,
        "reconcile": max(min(shed / 2, 30.0), 0.2),
        "bundle-data": max(config.loadBalancerResourceQuotaUpdateIntervalMinutes * 60, 0.2),
        "split": shed,
        "moves": max(min(MOVE_TICK_S, shed), 0.2),
    }


class LeaderSchedule:
    """Owns the scheduler; the service decides when jobs run (``resume``) and stop (``pause``)."""

    def __init__(self, on_run: Callable[[str, str], None] | None = None) -> None:
        """``on_run(job, outcome)`` is told of every run event (an outcome of ``RUN_OUTCOMES``)."""
        self._scheduler = BackgroundScheduler(daemon=True)
        self._on_run = on_run
        self.runs: dict[tuple[str, str], int] = {}  # (job, outcome) -> count
        self._runs_lock = threading.Lock()  # events arrive on the scheduler's and the executor's threads
        # Fixed delay (module doc): which jobs are running, which were woken meanwhile, whether the
        # schedule is active (leading), each job's interval. Changed under ``_state``.
        self._state = threading.Lock()
        self._active = False
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._intervals: dict[str, float] = {}
        mask = 0
        for code in _OUTCOME:
            mask |= code
        self._scheduler.add_listener(self._on_event, mask)

    def _on_event(self, event: JobEvent) -> None:
        # The scheduler's threads: count and log, nothing that could block or raise into APScheduler.
        outcome = _OUTCOME.get(event.code)
        if outcome is None:
            return
        job = str(event.job_id)
        with self._runs_lock:
            self.runs[(job, outcome)] = self.runs.get((job, outcome), 0) + 1
        due = _due(event)
        # A process may hold several schedules (an embedded demo beside a test's own): each record
        # says whose run it was, without changing the line an operator reads.
        mine = {"leader_schedule": id(self)}
        if outcome in ("missed", "max_instances"):
            why = "its previous run still running" if outcome == "max_instances" else "missed"
            log.warning("scheduled %s run due %s not started: %s", job, due, why, extra=mine)
        elif outcome == "error":
            exc = getattr(event, "exception", None)
            log.warning("scheduled %s run due %s raised: %r", job, due, exc, extra=mine)
        else:
            level = logging.INFO if job == "shedding" else logging.DEBUG
            if job == "moves":  # every second: its runs would bury every other line even at DEBUG
                level = logging.DEBUG - 5
            log.log(level, "scheduled %s run due %s %s", job, due, outcome, extra=mine)
        if self._on_run is not None:
            with contextlib.suppress(Exception):
                self._on_run(job, outcome)

    def start(self) -> None:
        self._scheduler.start()

    def shutdown(self) -> None:
        # No waiting for a running job: it may be blocked on a dead ZooKeeper, and the store's stop(),
        # which follows, fails its call. Leader writes are fenced transactions, so a cut job writes
        # all or nothing.
        with contextlib.suppress(Exception):
            self._scheduler.shutdown(wait=False)

    def apply(
        self, config: LoadBalancerConfig, funcs: Mapping[str, Callable[[], Any]], leading: bool
    ) -> None:
        """(Re)schedule every job at ``config``'s intervals; paused unless this instance is ``leading``."""
        intervals = job_intervals(config)
        with self._state:
            self._intervals = intervals
            self._active = leading
            running = set(self._running)
        for name, seconds in intervals.items():
            # A running job gets its next time when it ends (fixed delay), not now.
            first = datetime.now() + timedelta(seconds=seconds) if leading and name not in running else None
            self._scheduler.add_job(
                self._fixed_delay(name, funcs[name]),
                "interval",
                seconds=seconds,
                id=name,
                name=name,
                replace_existing=True,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                next_run_time=first,
            )

    def _fixed_delay(self, name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with self._state:
                self._running.add(name)
            with contextlib.suppress(Exception):
                self._scheduler.pause_job(name)  # nothing falls due while this run goes
            try:
                return fn()
            finally:
                with self._state:
                    self._running.discard(name)
                    again = name in self._again
                    self._again.discard(name)
                    seconds = 0.0 if again else self._intervals.get(name, 0.2)
                    if self._active:
                        with contextlib.suppress(Exception):
                            self._next(name, seconds)

        return run

    def _next(self, name: str, seconds: float) -> None:
        self._scheduler.modify_job(name, next_run_time=datetime.now() + timedelta(seconds=seconds))

    def resume(self, config: LoadBalancerConfig) -> None:
        """The term's first sync and reconcile are done: every job one interval from now."""
        intervals = job_intervals(config)
        with self._state:
            self._intervals = intervals
            self._active = True
            for name, seconds in intervals.items():
                if name not in self._running:  # a running one is given its time as it ends
                    with contextlib.suppress(Exception):
                        self._next(name, seconds)

    def pause(self) -> None:
        with self._state:
            self._active = False
            self._again.clear()
            for name in JOB_NAMES:
                with contextlib.suppress(Exception):
                    self._scheduler.pause_job(name)

    def wake(self, name: str) -> None:
        """Run job ``name`` now instead of at its next interval (right after, if it is running)."""
        with self._state:
            if name in self._running:
                self._again.add(name)
            elif self._active:
                with contextlib.suppress(Exception):
                    self._next(name, 0.0)


def _due(event: JobEvent) -> str:
    """When the run was due, to the second (a submission event may carry several coalesced times)."""
    when: Any = None
    if isinstance(event, JobSubmissionEvent) and event.scheduled_run_times:
        when = event.scheduled_run_times[-1]
    elif isinstance(event, JobExecutionEvent):
        when = event.scheduled_run_time
    return when.strftime("%H:%M:%S") if isinstance(when, datetime) else "?"
