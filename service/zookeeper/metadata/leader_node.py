"""The leader node (``/loadbalance/leader``; ``/loadmgr/leader`` in Pulsar mode) read with what its
signature must match (:mod:`service.leader.identity`): the session that owns the ephemeral node
(its ``Stat.ephemeralOwner``) and the current leader epoch (the version of ``/loadmgr/leader-epoch``).
A follower checks both before it forwards a request."""

from __future__ import annotations

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
