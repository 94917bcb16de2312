"""Errors of the live service.

Kazoo's exceptions never leave :mod:`service.zookeeper` (:func:`service.zookeeper.session.wire.translated`
and the session start in :mod:`service.zookeeper.session.nodes`): they become these.
"""

from __future__ import annotations

from balancer.errors import LoadMgrError


class ServiceError(LoadMgrError):
    """Base of the service's own errors."""


class NotLeader(ServiceError):
    """A mutation was asked of an instance that is not the leader; ``leader_url`` says where to go."""

    def __init__(self, leader_url: str | None, message: str | None = None) -> None:
        self.leader_url = leader_url
        where = f"; the leader is at {leader_url}" if leader_url else "; no leader is known right now"
        super().__init__((message or "this instance is not the leader") + where)


class AdminRequired(ServiceError):
    """The request would change the cluster (e.g. a lookup that assigns) and the caller is not admin."""


class StoreUnavailable(ServiceError):
    """ZooKeeper cannot be reached (suspended, lost, or timed out); retry later."""


class ZkAccessDenied(StoreUnavailable):
    """ZooKeeper refused an operation for lack of ACL: wrong credentials or a foreign node."""


class StaleWrite(ServiceError):
    """A compare-and-set write lost a race (the node changed, or this instance is no longer leader)."""


class FencedOut(StaleWrite):
    """This instance's leader epoch was superseded: a write fenced on it was refused by ZooKeeper.

    Whoever bumped the epoch (another instance, another mode on the same ZooKeeper, a hand edit),
    this instance is no longer the leader: it stops deciding at once and campaigns again."""


class ModeMismatch(ServiceError):
    """``serve`` was pointed at a ZooKeeper whose brokers belong to the other mode (a real Pulsar
    cluster without ``--mode pulsar``, or loadmgr's own agents with it)."""


class BundleBusy(ServiceError):
    """An unload or split of the bundle is under way (Pulsar mode): two at once would race in Pulsar."""


class ExecutorError(ServiceError):
    """A move or split the executor could not carry out (e.g. Pulsar's admin API refused it)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)
