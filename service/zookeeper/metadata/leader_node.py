"""The leader node (``/loadbalance/leader``; ``/loadmgr/leader`` in Pulsar mode) read with what its
signature must match (:mod:`service.leader.identity`): the session that owns the ephemeral node
(its ``Stat.ephemeralOwner``) and the current leader epoch (the version of ``/loadmgr/leader-epoch``).
A follower checks both before it forwards a request."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from service.zookeeper import paths as P
from service.zookeeper.session.nodes import JsonZk
from service.zookeeper.session.wire import translated


@dataclass(frozen=True)
class LeaderNode:
    """The leader node's JSON (None: not a JSON object), its owner session, the current epoch."""

    info: dict[str, Any] | None
    owner_session: int
    epoch: int | None


def read_leader_node(store: JsonZk, path: str = P.LEADER) -> LeaderNode | None:
    """The node at ``path``, or None when nobody leads; its bytes pass the store's validation like
    any node's."""
    with translated():
        try:
            raw, stat = store.client.get(path)
        except NoNodeError:
            return None
        epoch = store.client.exists(P.LEADER_EPOCH)
    got = store.parse_node(path, raw, stat, lambda value: value)
    info = got.value if got is not None and isinstance(got.value, dict) else None
    return LeaderNode(info, int(stat.ephemeralOwner), None if epoch is None else int(epoch.version))


MAX_EPOCH_DOC = 4096  # a leader id and a path; anything bigger is not ours


@dataclass(frozen=True)
class EpochOwner:
    """Who last bumped the leader epoch, and through which election node (so which mode)."""

    leader_id: str
    election_path: str  # "" when the node predates this field (a plain leader id)


def epoch_doc(leader_id: str, election_path: str) -> bytes:
    return json.dumps({"leaderId": leader_id, "electionPath": election_path}, sort_keys=True).encode()


def read_epoch_owner(store: JsonZk) -> EpochOwner | None:
    """The epoch node's content; None when there is none or it is not a JSON object naming both.

    Read as hostile input: anyone with write access may have put anything there; an older loadmgr
    wrote the bare leader id, which names no election node."""
    with translated():
        try:
            raw, _ = store.client.get(P.LEADER_EPOCH)
        except NoNodeError:
            return None
    if not raw or len(raw) > MAX_EPOCH_DOC:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return EpochOwner(raw[:200].decode("utf-8", "replace"), "")
    if not isinstance(doc, dict):
        return None
    leader, path = doc.get("leaderId"), doc.get("electionPath")
    if not isinstance(leader, str) or not isinstance(path, str) or not path.startswith("/"):
        return None
    return EpochOwner(leader, path)
