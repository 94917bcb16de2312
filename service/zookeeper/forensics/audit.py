"""Audit of loadmgr's writes, replayed from ZooKeeper's own transaction logs (:mod:`.txnlog`).

The replay walks every committed transaction in zxid order and keeps what the cluster looked like
at each one: which session held ``/loadbalance/leader``, which session registered each broker, what
each assignment named, each namespace's bundles and each bundle's ownership node. Against that it
checks, per transaction:

* every write to a leader-only node (assignments, the leader epoch, bundle data, bundle layouts)
  came from the session that held ``/loadbalance/leader`` at that zxid; writes before the first
  leader ever existed are the operator's set-up and are not judged;
* every ownership node was created by the session that registered the broker the bundle's
  assignment named at that zxid, and the broker it names (``brokerId``, else its ``httpUrl``) is that broker;
* no two ownership nodes of overlapping ranges of one namespace were held by different brokers.

It also measures, in the servers' own clock, every episode in which a live bundle had no ownership
node (``unowned``), counted from ``since_ms`` so the initial placement is not counted.
Refused transactions (a failed multi, an error) changed nothing and are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from balancer.bundles import BundleRange, NamespaceBundles, split_bundle_name
from service.zookeeper import paths as P
from service.zookeeper.forensics.txnlog import CREATES, Txn
from service.zookeeper.metadata.records import parse_owner
from service.zookeeper.session.validate import BadNode

LEADER_ONLY_ROOTS = (P.ASSIGNMENTS, P.BUNDLE_DATA, P.LOCAL_POLICIES)


@dataclass
class AuditReport:
    transactions: int = 0
    failed_transactions: int = 0
    leader_writes: int = 0
    ownership_creates: int = 0
    leader_terms: int = 0
    violations: list[str] = field(default_factory=list)
    double_owners: list[str] = field(default_factory=list)
    unowned_episodes_ms: list[int] = field(default_factory=list)
    unowned_episodes: list[tuple[int, int, str]] = field(default_factory=list)  # (start ms, length, bundle)
    longest_unowned: tuple[int, str] = (0, "")

    def summary(self) -> dict[str, Any]:
        return {
            "transactions": self.transactions,
            "failedTransactions": self.failed_transactions,
            "leaderWrites": self.leader_writes,
            "ownershipCreates": self.ownership_creates,
            "leaderTerms": self.leader_terms,
            "violations": len(self.violations),
            "doubleOwners": len(self.double_owners),
            "unownedEpisodes": len(self.unowned_episodes_ms),
            "longestUnownedMs": self.longest_unowned[0],
            "longestUnownedBundle": self.longest_unowned[1],
        }


def _rel(path: str, root: str) -> str | None:
    return path[len(root) + 1 :] if path.startswith(root + "/") else None


def _json(data: bytes | None) -> Any:
    try:
        return json.loads((data or b"").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


class _Replay:
    def __init__(self, since_ms: int) -> None:
        self.since_ms = since_ms
        self.r = AuditReport()
        self.ephemeral: dict[str, int] = {}  # path -> owning session
        self.leader: int | None = None
        self.seen_leader = False
        self.brokers: dict[str, int] = {}  # broker id -> session of its registration node
        self.assignments: dict[str, str | None] = {}
        self.layouts: dict[str, set[str]] = {}
        self.owners: dict[str, tuple[str, int]] = {}  # bundle -> (broker, session)
        self.unowned_since: dict[str, int] = {}

    def live(self) -> set[str]:
        return {b for bundles in self.layouts.values() for b in bundles}

    # ---- per transaction ----------------------------------------------------------------------
    def apply(self, t: Txn) -> None:
        self.r.transactions += 1
        if t.failed:
            self.r.failed_transactions += 1
            return
        if t.kind == "closeSession":
            gone = [p for p, s in self.ephemeral.items() if s == t.session]
            for path in sorted(set(gone) | set(t.closed_paths)):
                self._removed(path, t)
            return
        leader_before = self.leader
        for op in t.ops:
            if op.path is None or op.kind == "check":
                continue
            if self.seen_leader and self._leader_only(op.path) and op.kind != "check":
                self.r.leader_writes += 1
                if t.session != leader_before:
                    holder = "nobody" if leader_before is None else f"0x{leader_before:x}"
                    self.r.violations.append(
                        f"zxid 0x{t.zxid:x}: {op.kind} {op.path} by session 0x{t.session:x} "
                        f"while {holder} held {P.LEADER}"
                    )
            if op.kind in CREATES:
                if op.ephemeral:
                    self.ephemeral[op.path] = t.session
                self._written(op.path, op.data, t, created=True)
            elif op.kind == "setData":
                self._written(op.path, op.data, t, created=False)
            elif op.kind in ("delete", "deleteContainer"):
                self._removed(op.path, t)

    @staticmethod
    def _leader_only(path: str) -> bool:
        return path == P.LEADER_EPOCH or any(path.startswith(root + "/") for root in LEADER_ONLY_ROOTS)

    def _written(self, path: str, data: bytes | None, t: Txn, *, created: bool) -> None:
        if path == P.LEADER and created:
            self.leader = t.session
            self.seen_leader = True
            self.r.leader_terms += 1
        elif (broker := _rel(path, P.BROKERS)) is not None and created:
            self.brokers[broker] = t.session
        elif (bundle := _rel(path, P.ASSIGNMENTS)) is not None and P.is_range(path.rsplit("/", 1)[1]):
            doc = _json(data)
            self.assignments[bundle] = doc.get("broker") if isinstance(doc, dict) else None
        elif (ns := _rel(path, P.LOCAL_POLICIES)) is not None and ns.count("/") == 1:
            self._layout(ns, data, t)
        elif (
            (bundle := _rel(path, P.OWNERSHIP)) is not None and P.is_range(path.rsplit("/", 1)[1]) and created
        ):
            self._owned(bundle, data, t)

    def _removed(self, path: str, t: Txn) -> None:
        self.ephemeral.pop(path, None)
        if path == P.LEADER:
            self.leader = None
        elif (broker := _rel(path, P.BROKERS)) is not None:
            self.brokers.pop(broker, None)
        elif (bundle := _rel(path, P.ASSIGNMENTS)) is not None:
            self.assignments.pop(bundle, None)
        elif (bundle := _rel(path, P.OWNERSHIP)) is not None and bundle in self.owners:
            del self.owners[bundle]
            if bundle in self.live():
                self.unowned_since.setdefault(bundle, t.time_ms)

    def _layout(self, ns: str, data: bytes | None, t: Txn) -> None:
        doc = _json(data)
        try:
            bundles = set(NamespaceBundles.from_policies(ns, doc["bundles"]).bundle_names)
        except Exception:
            self.r.violations.append(f"zxid 0x{t.zxid:x}: unreadable layout of {ns}")
            return
        old = self.layouts.get(ns, set())
        self.layouts[ns] = bundles
        for gone in old - bundles:
            self._episode_end(gone, t.time_ms)
        for new in bundles - old:
            if new not in self.owners:
                self.unowned_since.setdefault(new, t.time_ms)

    def _owned(self, bundle: str, data: bytes | None, t: Txn) -> None:
        self.r.ownership_creates += 1
        doc = _json(data)
        try:  # the broker the node names, as every reader derives it (brokerId, else the httpUrl)
            claimed: str | None = parse_owner(doc)
        except BadNode:
            claimed = None
        assigned = self.assignments.get(bundle)
        holder = self.brokers.get(assigned) if assigned is not None else None
        if assigned is None or holder != t.session or claimed != assigned:
            self.r.violations.append(
                f"zxid 0x{t.zxid:x}: {bundle} taken by session 0x{t.session:x} as {claimed!r}; "
                f"its assignment named {assigned!r}, registered by "
                + ("no session" if holder is None else f"0x{holder:x}")
            )
        ns, rng = split_bundle_name(bundle)
        for other, (broker, _session) in self.owners.items():
            if other != bundle and broker != claimed and _overlap(other, ns, rng):
                self.r.double_owners.append(
                    f"zxid 0x{t.zxid:x}: {bundle} taken by {claimed} while {broker} holds {other}"
                )
        self.owners[bundle] = (str(claimed), t.session)
        self._episode_end(bundle, t.time_ms)

    def _episode_end(self, bundle: str, now_ms: int) -> None:
        start = self.unowned_since.pop(bundle, None)
        if start is None or now_ms <= self.since_ms:
            return
        length = now_ms - max(start, self.since_ms)
        self.r.unowned_episodes_ms.append(length)
        self.r.unowned_episodes.append((max(start, self.since_ms), length, bundle))
        if length > self.r.longest_unowned[0]:
            self.r.longest_unowned = (length, bundle)

    def finish(self, end_ms: int) -> AuditReport:
        for bundle in sorted(self.unowned_since):
            if bundle in self.live():
                self._episode_end(bundle, end_ms)
        return self.r


def _overlap(other: str, ns: str, rng: BundleRange) -> bool:
    other_ns, other_rng = split_bundle_name(other)
    return other_ns == ns and other_rng.lower < rng.upper and rng.lower < other_rng.upper


def _under(path: str | None, chroot: str) -> str | None:
    if path is None or not chroot:
        return path
    if path == chroot:
        return "/"
    return path[len(chroot) :] if path.startswith(chroot + "/") else None


def chrooted(t: Txn, chroot: str) -> Txn | None:
    """``t`` as a client of ``chroot`` sees it, or None when it touches nothing below it."""
    ops = tuple(replace(op, path=_under(op.path, chroot)) for op in t.ops)
    ops = tuple(op for op in ops if op.path is not None or op.kind == "error")
    closed = tuple(p for p in (_under(c, chroot) for c in t.closed_paths) if p is not None)
    if t.kind not in ("closeSession", "createSession") and not any(op.path for op in ops):
        return None
    return replace(t, ops=ops, closed_paths=closed)


def audit(
    history: Iterable[Txn], since_ms: int = 0, end_ms: int | None = None, chroot: str = ""
) -> AuditReport:
    """Replay ``history`` (zxid order) and judge every write; see the module docstring for the rules.

    ``chroot``: judge only the nodes below it, as the clients of that chroot name them (tests share
    one ensemble between chroots).
    """
    replay = _Replay(since_ms)
    last = 0
    chroot = chroot.rstrip("/")
    for t in history:
        seen = chrooted(t, chroot) if chroot else t
        if seen is not None:
            replay.apply(seen)
        last = max(last, t.time_ms)
    return replay.finish(end_ms if end_ms is not None else last)
