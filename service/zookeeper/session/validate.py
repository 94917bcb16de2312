"""The one validation boundary for bytes read from ZooKeeper.

Anyone who can write to ZooKeeper can write anything, so a node's bytes are checked before any JSON
parser sees them: a size limit and a nesting-depth limit (:mod:`service.json_bounds`, shared with
every JSON read over HTTP: Python's parser recurses per level, so a few kilobytes of ``[`` would
otherwise raise RecursionError far from here). Parsing then refuses
what Java's Jackson would never produce for Pulsar's records: NaN and Infinity, numbers that
overflow a double, and integers outside a Java ``long``. Whatever passes is plain finite JSON.

A node that fails is skipped by the reader. :class:`MalformedLog` keeps that from flooding: one log
line per node *version* (a node rewritten with new bad content is logged again, re-reading the same
bad node is not), at most ``burst`` lines per ``window_s`` with the rest summed into one line, and
a count per *path kind* (brokers, bundle-data, ...) so metric labels stay bounded however many
bad nodes an attacker creates.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from service.json_bounds import MAX_BYTES, MAX_DEPTH, JsonRefused, loads
from service.json_bounds import check_depth as _check_depth
from service.zookeeper import paths as P

log = logging.getLogger("service.zookeeper.session.nodes")

MAX_NODE_BYTES = MAX_BYTES
JAVA_LONG_MAX = 2**63 - 1
JAVA_LONG_MIN = -(2**63)

# Path kinds: the only label values the malformed-node metric ever carries.
PATH_KINDS = (
    "brokers",
    "bundle-data",
    "broker-time-average",
    "resource-quota",
    "local-policies",
    "ownership",
    "assignments",
    "workload",
    "leader",
    "other",
)
_KIND_ROOTS = (
    (P.BROKERS, "brokers"),
    (P.BUNDLE_DATA, "bundle-data"),
    (P.TIME_AVERAGE, "broker-time-average"),
    (P.RESOURCE_QUOTA, "resource-quota"),
    (P.LOCAL_POLICIES, "local-policies"),
    (P.OWNERSHIP, "ownership"),
    (P.ASSIGNMENTS, "assignments"),
    (P.WORKLOAD, "workload"),
    (P.LEADER, "leader"),
    (P.LEADER_EPOCH, "leader"),
    (P.LOADMGR_LEADER, "leader"),
    (P.LOADMGR_CONFIG, "config"),
)


class BadNode(JsonRefused):
    """A node's content is not acceptable; ``reason`` says why in one line."""


def path_kind(path: str) -> str:
    """The bounded label for ``path``: which of Pulsar's (or loadmgr's) roots it lies under."""
    for root, kind in _KIND_ROOTS:
        if path == root or path.startswith(root + "/"):
            return kind
    return "other"


def check_depth(raw: bytes, limit: int = MAX_DEPTH) -> None:
    """Raise BadNode if arrays/objects in ``raw`` nest deeper than ``limit``; never parses."""
    try:
        _check_depth(raw, limit)
    except JsonRefused as e:
        raise BadNode(e.reason) from None


def _constant(name: str) -> Any:
    raise BadNode(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadNode(f"number {text[:40]} overflows a double")
    return value


def _long(text: str) -> int:
    if len(text) > 20:  # a long has at most 19 digits and a sign; refuse before converting
        raise BadNode(f"integer of {len(text)} digits is outside a Java long")
    value = int(text)
    if not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
        raise BadNode(f"integer {text} is outside a Java long")
    return value


def decode(raw: bytes | None, max_bytes: int = MAX_NODE_BYTES) -> Any:
    """The JSON value of a node's bytes (None for an empty node), or BadNode saying why not."""
    try:
        return loads(
            raw,
            max_bytes=max_bytes,
            max_depth=MAX_DEPTH,
            parse_constant=_constant,
            parse_float=_finite_float,
            parse_int=_long,
        )
    except BadNode:
        raise
    except JsonRefused as e:
        raise BadNode(e.reason) from None


def finite_number(value: Any, field: str, lo: float | None = None, hi: float | None = None) -> float:
    """``value`` as a finite float within [lo, hi], or BadNode naming the field and the value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadNode(f"{field} = {str(value)[:40]!r} is not a number")
    x = float(value)
    if not math.isfinite(x) or (lo is not None and x < lo) or (hi is not None and x > hi):
        raise BadNode(f"{field} = {str(value)[:40]} is outside [{lo}, {hi}]")
    return x


class MalformedLog:
    """Skipped nodes: logged once per node version, rate-limited, counted by path kind.

    ``report`` returns True the first time it sees ``(path, zxid)`` (the modification zxid names
    one version of one node globally, so a deleted and recreated node counts again). Remembered
    versions are capped at ``remember`` paths; past that the memory is cleared and bad nodes are
    logged once more, which is bounded and better than unbounded memory.
    """

    def __init__(
        self,
        burst: int = 20,
        window_s: float = 60.0,
        remember: int = 200_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.window_s = window_s
        self.remember = remember
        self._clock = clock
        self._seen: dict[str, int] = {}
        self.by_kind: Counter[str] = Counter()
        self.by_path: Counter[str] = Counter()
        self.lines = 0
        self.suppressed = 0
        self._window_start = clock()
        self._window_lines = 0
        self._lock = threading.Lock()

    def known_bad(self, path: str, zxid: int) -> bool:
        """True if this exact version of ``path`` was already found bad: the caller skips it unparsed."""
        return zxid >= 0 and self._seen.get(path) == zxid

    def report(self, path: str, zxid: int, reason: str) -> bool:
        kind = path_kind(path)
        with self._lock:
            if zxid >= 0 and self._seen.get(path) == zxid:
                return False
            if zxid >= 0:
                if len(self._seen) >= self.remember:
                    self._seen.clear()
                self._seen[path] = zxid
            if len(self.by_path) < self.remember or path in self.by_path:
                self.by_path[path] += 1
            self.by_kind[kind] += 1
            now = self._clock()
            if now - self._window_start >= self.window_s:
                if self.suppressed:
                    log.warning("%d more malformed node(s) skipped without a log line", self.suppressed)
                    self.lines += 1
                self._window_start, self._window_lines, self.suppressed = now, 0, 0
            if self._window_lines >= self.burst:
                self.suppressed += 1
                return True
            self._window_lines += 1
            self.lines += 1
        log.warning("skipping malformed %s node %s: %s", kind, path[:300], reason[:300])
        return True
