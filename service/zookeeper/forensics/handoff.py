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

from service.zookeeper import paths as P
from service.zookeeper.forensics.audit import chrooted
from service.zookeeper.forensics.txnlog import CREATES, Txn


@dataclass
class Handoffs:
    gaps_ms: list[int] = field(default_factory=list)  # one per move, release to the new owner's create
    retaken: int = 0  # released then created again by the same session
    pending: int = 0  # released and not created again by the end of the history

    def percentile(self, q: float) -> int | None:
        if not self.gaps_ms:
            return None
        ordered = sorted(self.gaps_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> dict[str, Any]:
        return {
            "moves": len(self.gaps_ms),
            "p50Ms": self.percentile(0.5),
            "p99Ms": self.percentile(0.99),
            "maxMs": max(self.gaps_ms, default=None),
            "retaken": self.retaken,
            "pending": self.pending,
        }


def handoffs(history: Iterable[Txn], chroot: str = "", since_ms: int = 0) -> Handoffs:
    """Every release-then-create of an ownership node in ``history`` (zxid order) from ``since_ms``."""
    out = Handoffs()
    released: dict[str, tuple[int, int]] = {}  # ownership path -> (time released, releasing session)
    chroot = chroot.rstrip("/")
    for raw in history:
        t = chrooted(raw, chroot) if chroot else raw
        if t is None or t.failed:
            continue
        if t.kind == "closeSession":
            for closed in t.closed_paths:
                released.pop(closed, None)
            continue
        for op in t.ops:
            path = op.path
            if (
                path is None
                or not path.startswith(P.OWNERSHIP + "/")
                or not P.is_range(path.rsplit("/", 1)[1])
            ):
                continue
            if op.kind == "delete":
                released[path] = (t.time_ms, t.session)
            elif op.kind in CREATES and (got := released.pop(path, None)) is not None:
                when, session = got
                if when < since_ms:
                    continue
                if session == t.session:
                    out.retaken += 1
                else:
                    out.gaps_ms.append(t.time_ms - when)
    out.pending = sum(1 for when, _ in released.values() if when >= since_ms)
    return out
