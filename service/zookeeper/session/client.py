"""The one place a kazoo client is made: every ZooKeeper session of the project gets the same TLS,
credentials and node ACL, read from :class:`~service.settings.Settings` (``LOADMGR_ZK_*``).

A command that built its own ``KazooClient`` silently ignored ``LOADMGR_ZK_TLS``, ``LOADMGR_ZK_AUTH``
and ``LOADMGR_ZK_ACL`` (it could not connect to a TLS-only ensemble, was refused writes, or created
world-writable nodes); ``tests/unit/test_zk_client_factory.py`` proves no other construction exists.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.states import KeeperState

from balancer.errors import InvalidInput
from service.zookeeper.session.hosts import check_hosts
from service.zookeeper.session.security import ZkSecurity


class Client(KazooClient):  # type: ignore[misc]
    """A kazoo client that remembers the server refused its login.

    kazoo's ``start()`` sets the session live before the SASL exchange; when the refusal arrives before
    ``start()`` looks at the session again (a loaded machine), it reports a connection time-out, and
    the state says CLOSED by then. ``login_refused`` keeps the one fact that tells the two apart.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.login_refused = False

    def _session_callback(self, state: Any) -> None:
        if state == KeeperState.AUTH_FAILED:
            self.login_refused = True
        super()._session_callback(state)


def new_client(
    hosts: str,
    security: ZkSecurity,
    timeout_s: float,
    *,
    client_id: tuple[int, bytes] | None = None,
) -> Client:
    """A kazoo client (not started) for ``hosts`` (``host:port,...[/chroot]``) as ``security`` says.

    ``client_id`` resumes an existing session (session id, password). A malformed connection string is
    InvalidInput naming it, before any connection is tried.
    """
    try:
        check_hosts(hosts)
    except ValueError as e:
        raise InvalidInput("zk_hosts", hosts, str(e)) from None
    return Client(hosts=hosts, timeout=timeout_s, client_id=client_id, **security.kazoo_kwargs())
