"""The faults the soak (``bench/soak.py``) injects, each with its heal: SIGKILL or SIGSTOP of the
leader, of an agent, or of a ZooKeeper member, one at a time.

``SoakFaults`` is a mixin of ``Soak``: the step loop draws a kind and calls ``_<kind>``; the faults
read and record into the soak's state (annotated below), and queue their heal in ``heals``.
"""

from __future__ import annotations

import collections
import contextlib
import random
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soak_process import Proc

    from service.zookeeper.server.ensemble import ZooKeeperEnsemble

# The ZooKeeper session timeout of every soak process; pauses and heal delays are sized by it.
SESSION_S = 4.0


class SoakFaults:
    """Fault steps of ``Soak``; heals are (due monotonic time, what, callable) in ``heals``."""

    rng: random.Random
    ensemble: ZooKeeperEnsemble
    serves: dict[str, Proc]
    agents: dict[str, Proc]
    heals: list[tuple[float, str, Callable[[], None]]]
    steps: collections.Counter[str]
    faults: collections.Counter[str]
    pending_failover: tuple[float, int] | None
    quiet_until: float
    leader: Callable[[], tuple[str, int] | None]

    def _busy(self) -> bool:
        # One fault at a time, and none until the last one's effects are over (a killed process's
        # session expires up to a session timeout after its restart): the bound on unowned time is
        # per failure; overlapping failures add up, as they would in any system.
        return bool(self.heals) or self.pending_failover is not None or time.monotonic() < self.quiet_until

    def _fault_on_leader(self, pause: bool) -> None:
        got = self.leader()
        if got is None or self._busy():
            return
        proc = self.serves[got[0]]
        if pause:
            hold = self.rng.uniform(1.0, 2.5 * SESSION_S)
            proc.signal(signal.SIGSTOP)
            proc.paused = True
            self.faults["pause_leader"] += 1
            self.heals.append((time.monotonic() + hold, "serve_resume", lambda: self._resume(proc)))
        else:
            proc.kill()
            self.faults["kill_leader"] += 1
            self.heals.append((time.monotonic() + self.rng.uniform(2, 10), "serve_restart", proc.start))
        self.pending_failover = (time.monotonic(), got[1])

    def _resume(self, proc: Proc) -> None:
        proc.signal(signal.SIGCONT)
        proc.paused = False
        if self.pending_failover is not None:
            # Back before its session expired: the same leader goes on, nothing failed over.
            with contextlib.suppress(Exception):
                got = self.leader()
                if got is not None and got[1] == self.pending_failover[1]:
                    self.pending_failover = None
                    self.steps["pause_without_failover"] += 1

    def _kill_leader(self) -> None:
        self._fault_on_leader(pause=False)

    def _pause_leader(self) -> None:
        self._fault_on_leader(pause=True)

    def _fault_on_agent(self, pause: bool) -> None:
        if self._busy():
            return
        proc = self.agents[self.rng.choice(sorted(self.agents))]
        if pause:
            proc.signal(signal.SIGSTOP)
            self.faults["pause_agent"] += 1
            hold = self.rng.uniform(1.0, 2.5 * SESSION_S)
            self.heals.append((time.monotonic() + hold, "agent_resume", lambda: proc.signal(signal.SIGCONT)))
        else:
            proc.kill()
            self.faults["kill_agent"] += 1
            self.heals.append((time.monotonic() + self.rng.uniform(2, 10), "agent_restart", proc.start))

    def _kill_agent(self) -> None:
        self._fault_on_agent(pause=False)

    def _pause_agent(self) -> None:
        self._fault_on_agent(pause=True)

    def _fault_on_zk(self, pause: bool) -> None:
        # One member at a time, and only once the previous one has rejoined: the quorum never goes.
        if self._busy() or len(self.ensemble.serving()) < 3:
            return
        i = self.rng.randrange(3)
        if pause:
            self.ensemble.pause(i)
            self.faults["pause_zk_member"] += 1
            hold = self.rng.uniform(1.0, 2.0 * SESSION_S)
            self.heals.append((time.monotonic() + hold, "zk_resume", lambda: self.ensemble.resume(i)))
        else:
            self.ensemble.kill(i)
            self.faults["kill_zk_member"] += 1
            self.heals.append(
                (
                    time.monotonic() + self.rng.uniform(2, 10),
                    "zk_restart",
                    lambda: self.ensemble.start_member(i),
                )
            )

    def _kill_zk_member(self) -> None:
        self._fault_on_zk(pause=False)

    def _pause_zk_member(self) -> None:
        self._fault_on_zk(pause=True)
