"""Warming a destination broker before the first bundle moves into it.

On real brokers the first bundle with traffic a broker receives costs its clients far more than the
later ones: in the head-to-head the first move into each broker left a 2.2-2.3 s publish gap (5.5-6.2 s
into a broker that had just joined) where later moves into the same broker cost 0.4-0.9 s, and the
drain bench saw the same (1.1-6.6 s against 0.3-0.9 s). What the broker pays once is its first
topic: its BookKeeper client's connections, the managed-ledger and topic-loading code run for the
first time. Pulsar's own broker health check (``GET /admin/v2/brokers/health``) creates a topic in the
broker's heartbeat namespace, which only that broker can own, and round-trips a message through a
producer and a reader on it: the same path, paid before any client waits on it.

So before a move into a broker that has not been warmed in the last ``every_s`` (a broker that
restarted is cold again, and the check is cheap on a warm one), :class:`Warmer` runs that check on
the destination. It never stands in the move's way: a check refused for want of permission turns
warming off (logged once), a failed or slow one is logged and counted and the move goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import httpx

log = logging.getLogger(__name__)

HEALTH = "/admin/v2/brokers/health"


class Warmer:
    """Runs Pulsar's health check on a destination broker before moves into it (see module doc).

    ``get(url, timeout)`` returns the HTTP status; ``clock`` is monotonic seconds. ``on_result(result,
    seconds)`` is told each check's outcome: ``ok``, ``failed`` or ``refused``."""

    def __init__(
        self,
        get: Callable[[str, float], int],
        scheme: str,
        timeout_s: float,
        every_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        on_result: Callable[[str, float], None] | None = None,
    ) -> None:
        self._get = get
        self._scheme = scheme
        self.timeout_s = timeout_s
        self.every_s = every_s
        self._clock = clock
        self._on_result = on_result
        self._warmed: dict[str, float] = {}
        self._lock = threading.Lock()
        # One check at a time per broker: the shedding cycle's thread and the move tick's may both move
        # into it at once (a clean-clone run counted 3 checks for 2 destinations); the second waits for
        # the first and then finds it warm.
        self._per_broker: dict[str, threading.Lock] = {}
        self.disabled: str | None = None if timeout_s > 0 else "off (pulsar_warm_up_timeout_s is 0)"

    def due(self, broker: str) -> bool:
        with self._lock:
            if self.disabled is not None:
                return False
            at = self._warmed.get(broker)
            return at is None or self._clock() - at >= self.every_s

    def warm(self, broker: str) -> str | None:
        """Warm ``broker`` (``host:port`` of its web service) if it is due; returns what happened
        (for the log) or None when nothing was done."""
        if not broker or not self.due(broker):
            return None
        with self._lock:
            one = self._per_broker.setdefault(broker, threading.Lock())
        with one:
            if not self.due(broker):
                return None
            return self._check(broker)

    def _check(self, broker: str) -> str:
        started = self._clock()
        try:
            status = self._get(f"{self._scheme}://{broker}{HEALTH}", self.timeout_s)
        except httpx.HTTPError as e:
            status, why = 0, f"{type(e).__name__}: {e}"
        else:
            why = f"HTTP {status}"
        took = self._clock() - started
        with self._lock:
            self._warmed[broker] = self._clock()
            if status in (401, 403):
                self.disabled = f"Pulsar refused its health check ({why}): warming destinations is off"
        if status in (401, 403):
            result = "refused"
            log.warning("warming %s: %s", broker, self.disabled)
        elif 200 <= status < 300:
            result = "ok"
            log.info("warmed %s with Pulsar's health check in %.2f s before moving into it", broker, took)
        else:
            result = "failed"
            log.warning(
                "warming %s: Pulsar's health check failed after %.2f s (%s); moving into it anyway",
                broker,
                took,
                why,
            )
        if self._on_result is not None:
            self._on_result(result, took)
        return f"{result} in {took:.2f} s"

    def forget(self, broker: str) -> None:
        with self._lock:
            self._warmed.pop(broker, None)
