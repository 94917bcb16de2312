"""``WriteWindow``: how the leader's jobs write without blocking the service, and find lost hints.

A mixin of :class:`service.leader.jobs.LeaderJobs` (kept apart so ``jobs.py`` stays under the
~400-line guideline):

* ``_writing(bundles)``: plan / write / apply. A job plans and applies under the service lock but
  waits for its ZooKeeper batches with the lock let go (``unlocked``, set by the service), the
  bundles marked ``in_flight`` meanwhile so no other job plans them; manual operations, REST and the
  other jobs never wait for a cycle's writes. Every write is compare-and-set, so a manual write that
  lands first only makes the cycle's write of that bundle refused.
* ``_resend_hints``: the agents' hints (``docs/ownership.md``, rule 3) for assignments that were
  written without one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from service.leader.load_view import Snapshot
from service.zookeeper import paths as P
from service.zookeeper.session.batch import Op, commit_batches

if TYPE_CHECKING:
    from service.leader.executors import ZkExecutor
    from service.zookeeper.metadata.store import ZkStore

log = logging.getLogger(__name__)


class WriteWindow:
    if TYPE_CHECKING:
        store: ZkStore
        assigner: ZkExecutor
        unlocked: Callable[[], AbstractContextManager[None]]
        in_flight: frozenset[str]
        unlocked_s: float
        hints_resent: int
        _waiting: dict[str, int]

        def is_leader(self) -> bool: ...

    @contextlib.contextmanager
    def _writing(self, bundles: Iterable[str]) -> Iterator[None]:
        """Wait for this job's writes of ``bundles`` with the service lock let go (``unlocked``)."""
        mine = frozenset(bundles)
        self.in_flight = self.in_flight | mine
        started = time.monotonic()
        try:
            with self.unlocked():
                yield
        finally:
            self.in_flight = self.in_flight - mine
            self.unlocked_s += time.monotonic() - started

    def _resend_hints(self, snap: Snapshot, live: set[str]) -> None:
        """Hint again each bundle still unowned, at the same assignment version, since the last
        reconcile although its assigned broker is alive: an assignment written without a hint (by an
        older loadmgr or by hand) or a hint lost, so the agent never looked. O(such bundles)."""
        waiting = {
            b: a.version
            for b in live
            if b not in snap.owners
            and b not in snap.owner_versions
            and (a := snap.assignments.get(b)) is not None
            and a.value.broker in snap.brokers
        }
        again = [b for b, v in sorted(waiting.items()) if self._waiting.get(b) == v]
        self._waiting = waiting
        if not again or not self.is_leader():
            return
        ops = [
            Op("create", P.hint_prefix(snap.assignments[b].value.broker, b), b"", key=b, sequence=True)
            for b in again
        ]
        sent = commit_batches(self.store, ops, self.assigner.current_fence())
        self.hints_resent += len(sent.done)
        log.info("%d bundle(s) assigned to a live broker but still unowned: hinted again", len(sent.done))
