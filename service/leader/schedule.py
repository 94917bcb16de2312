"""``LeaderSchedule``: the leader's periodic jobs on one APScheduler, at Pulsar's intervals.

* ``shedding`` every ``loadBalancerSheddingIntervalMinutes``: one snapshot, orphan placement, one
  ``plan_shedding_cycle`` decision, then the moves, each in the bounded decision log;
* ``reconcile`` at half that interval (and at once when leadership is won): unowned bundles of live
  namespaces get a broker, so a dead broker's bundles are owned again within one shedding interval;
* ``bundle-data`` every ``loadBalancerResourceQuotaUpdateIntervalMinutes``: bundle data (top K) and
  brokers' time averages written;
* ``split`` every shedding interval: Pulsar's split conditions, executed through the executor.

Jobs are paused while this instance does not lead. Intervals are minutes, fractions allowed
(0.05 = 3 s); each is floored at 0.2 s.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from balancer.config import LoadBalancerConfig
from service.leader.metrics_sink import JOB_NAMES

__all__ = ["JOB_NAMES", "LeaderSchedule", "job_intervals"]

# APScheduler logs two INFO lines per job run ("Running job", "executed successfully"); four jobs
# every few seconds bury the service's own log. Its warnings (missed runs, job errors) still show.
logging.getLogger("apscheduler").setLevel(logging.WARNING)


def job_intervals(config: LoadBalancerConfig) -> dict[str, float]:
    """Seconds between runs of each job under ``config``."""
    shed = max(config.loadBalancerSheddingIntervalMinutes * 60, 0.2)
    return {
        "shedding": shed,
        "reconcile": max(min(shed / 2, 30.0), 0.2),
        "bundle-data": max(config.loadBalancerResourceQuotaUpdateIntervalMinutes * 60, 0.2),
        "split": shed,
    }


class LeaderSchedule:
    """Owns the scheduler; the service decides when jobs run (``resume``) and stop (``pause``)."""

    def __init__(self) -> None:
        self._scheduler = BackgroundScheduler(daemon=True)

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
        for name, seconds in job_intervals(config).items():
            self._scheduler.add_job(
                funcs[name],
                "interval",
                seconds=seconds,
                id=name,
                name=name,
                replace_existing=True,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                next_run_time=datetime.now() + timedelta(seconds=seconds) if leading else None,
            )

    def resume(self, config: LoadBalancerConfig) -> None:
        """Leadership won: reconcile at once (orphans first), every other job one interval from now."""
        now = datetime.now()
        for name, seconds in job_intervals(config).items():
            first = now if name == "reconcile" else now + timedelta(seconds=seconds)
            with contextlib.suppress(Exception):
                self._scheduler.modify_job(name, next_run_time=first)

    def pause(self) -> None:
        for name in JOB_NAMES:
            with contextlib.suppress(Exception):
                self._scheduler.pause_job(name)

    def wake(self, name: str) -> None:
        """Run job ``name`` now instead of at its next interval."""
        with contextlib.suppress(Exception):
            self._scheduler.modify_job(name, next_run_time=datetime.now())
