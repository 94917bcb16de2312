"""``Readiness``: whether a ``loadmgr serve`` instance is ready, and what ``/readyz`` reports.

A mixin of :class:`service.leader.service.LoadManagerService`, kept in its own module so ``service.py``
stays under the ~400-line guideline; it reads the failure counts and cycle times the service's job
wrapper keeps.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from service.leader.schedule import job_intervals

if TYPE_CHECKING:
    from balancer.config import LoadBalancerConfig
    from service.leader.election import LeaderElection
    from service.settings import Settings
    from service.zookeeper.metadata.store import ZkStore

JOB_FAILURES_NOT_READY = 3  # one failure can be a ZooKeeper blip; three in a row is a stuck job
# After stepping down because its epoch was superseded, an instance says so (not ready) until it
# leads again or this long has passed: long enough for a probe and an operator to see it.
STEPPED_DOWN_NOT_READY_S = 60.0
STALE_VIEW_INTERVALS = 3


class Readiness:
    """``ready``, ``not_ready_reasons`` and ``readiness``; the state they read is the service's."""

    if TYPE_CHECKING:
        # Provided by LoadManagerService, the only class this mixes into.
        store: ZkStore
        election: LeaderElection
        _config: LoadBalancerConfig
        _started: bool
        _consecutive_failures: dict[str, int]
        _last_cycle_ok: float | None
        _leading_since: float | None
        _synced: bool

        def is_leader(self) -> bool: ...

        settings: Settings

        def pulsar_reason(self) -> str | None: ...

    def ready(self) -> bool:
        """Started, connected to ZooKeeper and, while leading, actually doing the leader's work."""
        return not self.not_ready_reasons()

    def not_ready_reasons(self) -> list[str]:
        """Why this instance is not ready (empty: ready).

        Connected is not enough: a leader whose jobs fail every run, or whose view has not been
        refreshed for several intervals, balances nothing while looking healthy. So a leader is not
        ready after ``JOB_FAILURES_NOT_READY`` consecutive failures of one job or when its last
        successful shedding cycle is older than ``STALE_VIEW_INTERVALS`` shedding intervals."""
        if not self._started:
            return ["not started"]
        if not self.store.connected:
            return ["not connected to ZooKeeper"]
        if self.election.blocked is not None:
            return [f"not campaigning: {self.election.blocked}"]
        if not self.is_leader():
            down = self._recent_step_down()
            return [] if down is None else [down]
        if not self._synced:
            return ["leading, but the first full sync of ZooKeeper and first reconcile are not done"]
        pulsar = self.pulsar_reason()
        if pulsar is not None and not self.settings.pulsar_beside_brokers:
            return [f"refusing to act on Pulsar's brokers: {pulsar}"]
        reasons = [
            f"{job} job failed {n} times in a row"
            for job, n in sorted(self._consecutive_failures.items())
            if n >= JOB_FAILURES_NOT_READY
        ]
        interval_s = job_intervals(self._config)["shedding"]
        since = self._leading_since if self._last_cycle_ok is None else self._last_cycle_ok
        if since is not None and time.monotonic() - since > STALE_VIEW_INTERVALS * interval_s + 5.0:
            reasons.append(f"no successful shedding cycle for {time.monotonic() - since:.0f} s")
        return reasons

    def _recent_step_down(self) -> str | None:
        """'stepped down N s ago: why' while that is recent and this instance has not led since."""
        down = self.election.last_step_down
        if down is None or self.is_leader():
            return None
        ago = time.monotonic() - down[0]
        if ago > STEPPED_DOWN_NOT_READY_S:
            return None
        return f"stepped down as leader {ago:.0f} s ago: {down[1]}; campaigning again"

    def readiness(self) -> dict[str, Any]:
        """What ``/readyz`` reports: the ZooKeeper connection state, whether this instance leads and
        decides, and, when it does not decide although it was leading, why (operators see a quorum
        loss here as the reason no moves happen)."""
        state = "CONNECTED" if self.store.connected else self.election.connection_state
        details: dict[str, Any] = {"zookeeper": state, "leader": self.is_leader()}
        if details["leader"]:
            details["synced"] = self._synced
        if self.settings.pulsar_mode:
            pulsar = self.pulsar_reason()
            details["pulsar"] = {
                "acting": pulsar is None,
                "dryRun": pulsar is not None and self.settings.pulsar_beside_brokers,
                "reason": pulsar,
            }
        if not self._started:
            details["reason"] = "not started"
        elif state == "SUSPENDED" or (state == "CONNECTED" and not self.store.connected):
            details["reason"] = (
                "ZooKeeper connection suspended (the member is down or the ensemble has no quorum); "
                f"no decisions until it is back, the session survives up to {self.store.session_timeout_s:g}s"
            )
        elif state == "LOST":
            details["reason"] = "ZooKeeper session lost; reconnecting with a new session, leadership given up"
        elif self.election.leading_unconfirmed():
            details["reason"] = "reconnected; re-checking the leader node before deciding again"
        elif self.election.blocked is not None:
            details["reason"] = f"not campaigning: {self.election.blocked}"
        elif (down := self._recent_step_down()) is not None:
            details["reason"] = down
        if self.election.last_step_down is not None:
            details["stepDowns"] = self.election.fenced_out_count
        return details
