"""The one place a kazoo client is made: every ZooKeeper session of the project gets the same TLS,
credentials and node ACL, read from :class:`~service.settings.Settings` (``LOADMGR_ZK_*``).

A command that built its own ``KazooClient`` silently ignored ``LOADMGR_ZK_TLS``, ``LOADMGR_ZK_AUTH``
and ``LOADMGR_ZK_ACL`` (it could not connect to a TLS-only ensemble, was refused writes, or created
world-writable nodes); ``tests/unit/test_zk_client_factory.py`` proves no other construction exists.
"""

from __future__ import annotations

from kazoo.client import KazooClient

from balancer.errors import InvalidInput
from service.zookeeper.session.hosts import check_hosts
from service.zookeeper.session.security import ZkSecurity


def new_client(
    hosts: str,
    security: ZkSecurity,
    timeout_s: float,
    *,
    client_id: tuple[int, bytes] | None = None,
) -> KazooClient:
    """A kazoo client (not started) for ``hosts`` (``host:port,...[/chroot]``) as ``security`` says.

    ``client_id`` resumes an existing session (session id, password). A malformed connection string is
    InvalidInput naming it, before any connection is tried.
    """
    try:
        check_hosts(hosts)
    except ValueError as e:
        raise InvalidInput("zk_hosts", hosts, str(e)) from None
    return KazooClient(hosts=hosts, timeout=timeout_s, client_id=client_id, **security.kazoo_kwargs())
