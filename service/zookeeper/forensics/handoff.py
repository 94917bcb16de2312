"""Unowned time per move, from ZooKeeper's transaction logs (:mod:`.txnlog`).

A move is a release (a ``delete`` of ``/namespace/<bundle>`` by the owner's session) followed by
the new owner's ``create`` of the same node from another session. The gap between the two, in the
server's own clock, is the time the bundle had no owner because it moved; a node removed by a
session's end (``closeSession``, a broker dying) is not a move and is not counted. A create while
another session still holds the node cannot happen (ZooKeeper refuses it), so two owners of one
node never show up here; :func:`service.zookeeper.forensics.audit.audit` checks overlapping ranges.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from balancer.longterm import percentile_nearest_rank
from service.zookeeper import paths as P
from service.zookeeper.forensics.audit import chrooted
from service.zookeeper.forensics.txnlog import CREATES, Txn


@dataclass
class Handoffs:
    gaps_ms: list[int] = field(default_factory=list)  # one per move, release to the new owner's create
    released_ms: list[int] = field(default_factory=list)  # each move's release, the server's clock
    # Of those, the moves whose new owner had said it was ready (its /loadmgr/handoff node existed)
    # when the old owner let go; the others were let go before (the bound ran out, an older agent).
    ready_gaps_ms: list[int] = field(default_factory=list)
    retaken: int = 0  # released then created again by the same session
    pending: int = 0  # released and not created again by the end of the history

    def percentile(self, q: float) -> int | None:
        return _percentile(self.gaps_ms, q)

    def summary(self) -> dict[str, Any]:
        return {
            "moves": len(self.gaps_ms),
            "p50Ms": self.percentile(0.5),
            "p99Ms": self.percentile(0.99),
            "maxMs": max(self.gaps_ms, default=None),
            "retaken": self.retaken,
            "pending": self.pending,
            "readyFirst": len(self.ready_gaps_ms),
            "readyFirstP50Ms": _percentile(self.ready_gaps_ms, 0.5),
            "readyFirstP99Ms": _percentile(self.ready_gaps_ms, 0.99),
        }


def _percentile(values: list[int], q: float) -> int | None:
    """Nearest rank, as every other percentile the project reports (``int(q * n)`` made the p99 of
    100 gaps their maximum and the p50 of two the larger)."""
    if not values:
        return None
    return int(percentile_nearest_rank(values, q))


def _count_ready(ready: dict[str, int], path: str, step: int) -> None:
    """A "ready" node at ``path`` created (+1) or removed (-1): counted against its bundle's node."""
    bundle = P.handoff_bundle(path)
    if bundle is not None:
        owner_path = P.ownership_path(bundle)
        ready[owner_path] = max(0, ready.get(owner_path, 0) + step)


def handoffs(history: Iterable[Txn], chroot: str = "", since_ms: int = 0) -> Handoffs:
    """Every release-then-create of an ownership node in ``history`` (zxid order) from ``since_ms``."""
    out = Handoffs()
    released: dict[str, tuple[int, int, bool]] = {}  # ownership path -> (time, session, ready first)
    ready: dict[str, int] = {}  # ownership path -> "ready" nodes of its bundle that exist now
    chroot = chroot.rstrip("/")
    for raw in history:
        t = chrooted(raw, chroot) if chroot else raw
        if t is None or t.failed:
            continue
        if t.kind == "closeSession":
            for closed in t.closed_paths:
                released.pop(closed, None)
                _count_ready(ready, closed, -1)  # a "ready" node gone with its session
            continue
        for op in t.ops:
            path = op.path
            if path is not None and path.startswith(P.HANDOFF + "/"):
                _count_ready(ready, path, 1 if op.kind in CREATES else -1 if op.kind == "delete" else 0)
                continue
            if (
                path is None
                or not path.startswith(P.OWNERSHIP + "/")
                or not P.is_range(path.rsplit("/", 1)[1])
            ):
                continue
            if op.kind == "delete":
                released[path] = (t.time_ms, t.session, ready.get(path, 0) > 0)
            elif op.kind in CREATES and (got := released.pop(path, None)) is not None:
                when, session, ready_first = got
                if when < since_ms:
                    continue
                if session == t.session:
                    out.retaken += 1
                else:
                    out.gaps_ms.append(t.time_ms - when)
                    out.released_ms.append(when)
                    if ready_first:
                        out.ready_gaps_ms.append(t.time_ms - when)
    out.pending = sum(1 for when, _, _ in released.values() if when >= since_ms)
    return out
