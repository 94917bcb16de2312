"""Whose brokers a ZooKeeper serves: a real Pulsar cluster's, or loadmgr's own agents'.

``loadmgr serve`` in the wrong mode is worse than no load manager: ZooKeeper-native mode campaigns on
``/loadbalance/leader``, the node Pulsar's brokers elect their leader on and route lookups through,
and Pulsar mode beside loadmgr's agents fences their leader out. So before it campaigns an instance
reads what each kind leaves in ZooKeeper and refuses the mode that does not fit (see
:func:`mode_conflict`). Everything read here is treated as hostile: a node that does not parse is no
evidence either way.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import NoNodeError

from service.zookeeper import paths as P
from service.zookeeper.metadata.leader_node import read_epoch_owner
from service.zookeeper.session.nodes import JsonZk
from service.zookeeper.session.wire import translated

# Nodes only Pulsar and its BookKeeper create: managed ledgers, and the bookies' ledger metadata.
PULSAR_ONLY = ("/managed-ledgers", "/ledgers")
# The key loadmgr's own leader node carries once won (service.leader.identity.EPOCH_KEY).
LOADMGR_EPOCH_KEY = "loadmgrEpoch"
MAX_DOC = 64 * 1024
# How long an unsigned leader node is given to gain its epoch before it counts as a Pulsar broker's.
SIGNING_GRACE_S = 2.0


@dataclass
class ClusterKind:
    """What the ZooKeeper shows: evidence of Pulsar's brokers and of loadmgr's agents."""

    pulsar: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)


def _get(zk: JsonZk, path: str) -> tuple[Any, int] | None:
    """``(JSON or None, ephemeral owner)`` of ``path``; None when it does not exist."""
    with translated():
        try:
            raw, stat = zk.client.get(path)
        except NoNodeError:
            return None
    doc: Any = None
    if raw and len(raw) <= MAX_DOC:
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            doc = None
    return doc, int(stat.ephemeralOwner)


def _exists(zk: JsonZk, path: str) -> bool:
    with translated():
        return zk.client.exists(path) is not None


def _leader_node(zk: JsonZk) -> tuple[Any, int] | None:
    """The leader node, given a moment to be signed: a ZooKeeper-native loadmgr creates it with
    Pulsar's two fields and adds its epoch right after winning, so an instance starting beside it
    may read it in between (two instances started together). A Pulsar broker's never gains one."""
    deadline = time.monotonic() + SIGNING_GRACE_S
    while True:
        got = _get(zk, P.LEADER)
        unsigned = got is not None and isinstance(got[0], dict) and LOADMGR_EPOCH_KEY not in got[0]
        if not unsigned or got is None or got[1] == 0 or time.monotonic() >= deadline:
            return got
        time.sleep(0.1)


def read_cluster_kind(zk: JsonZk) -> ClusterKind:
    kind = ClusterKind()
    for path in PULSAR_ONLY:
        if _exists(zk, path):
            kind.pulsar.append(f"{path} exists")
    for cluster in zk.children(P.CLUSTERS):
        got = _get(zk, P.join(P.CLUSTERS, cluster))
        if got is not None and isinstance(got[0], dict) and isinstance(got[0].get("serviceUrl"), str):
            kind.pulsar.append(f"{P.CLUSTERS}/{cluster} holds Pulsar's cluster data")
            break
    leader = _leader_node(zk)
    if leader is not None and leader[1] != 0 and leader[1] != zk.session_id:
        doc = leader[0]
        if isinstance(doc, dict) and LOADMGR_EPOCH_KEY in doc:
            who = str(doc.get("brokerId"))[:80]
            kind.agents.append(f"a ZooKeeper-native loadmgr leads on {P.LEADER} ({who})")
        elif isinstance(doc, dict) and isinstance(doc.get("serviceUrl"), str):
            kind.pulsar.append(f"{P.LEADER} is held by Pulsar broker {doc['serviceUrl']:.80}")
    if zk.children(P.ASSIGNMENTS):
        kind.agents.append(f"{P.ASSIGNMENTS} holds the ZooKeeper-native leader's assignments")
    owner = read_epoch_owner(zk)
    if owner is not None and owner.election_path == P.LEADER and kind.agents:
        kind.agents.append(f"the leader epoch was last won in ZooKeeper-native mode by {owner.leader_id:.80}")
    return kind


def mode_conflict(zk: JsonZk, mode: str, explicit: bool) -> tuple[str | None, str | None]:
    """``(refusal, warning)`` for running ``mode`` on this ZooKeeper; both None when it fits.

    ZooKeeper-native mode on a Pulsar cluster is refused unless the mode was asked for explicitly
    (``--mode zookeeper`` / ``LOADMGR_MODE``), then only warned about; Pulsar mode beside loadmgr's
    agents is always refused: there is nothing for it to drive there."""
    kind = read_cluster_kind(zk)
    if mode == "pulsar":
        if kind.agents:
            return (
                "this ZooKeeper's brokers are loadmgr's own agents ("
                + "; ".join(kind.agents)
                + "): run `loadmgr serve` in ZooKeeper-native mode (--mode zookeeper), not --mode pulsar",
                None,
            )
        return None, None
    if not kind.pulsar:
        return None, None
    why = "; ".join(kind.pulsar)
    if explicit:
        return None, (
            f"WARNING: this ZooKeeper serves a Pulsar cluster ({why}), and --mode zookeeper makes loadmgr "
            f"campaign on {P.LEADER}, Pulsar's own leader node"
        )
    return (
        f"this ZooKeeper serves a Pulsar cluster ({why}): run `loadmgr serve --mode pulsar "
        "--pulsar-admin-url http://<broker>:8080` to decide for its brokers (--mode zookeeper to "
        "run loadmgr's own agents here anyway)",
        None,
    )
