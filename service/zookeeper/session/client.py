"""The one place a kazoo client is made: every ZooKeeper session of the project gets the same TLS,
credentials and node ACL, read from :class:`~service.settings.Settings` (``LOADMGR_ZK_*``).

A command that built its own ``KazooClient`` silently ignored ``LOADMGR_ZK_TLS``, ``LOADMGR_ZK_AUTH``
and ``LOADMGR_ZK_ACL`` (it could not connect to a TLS-only ensemble, was refused writes, or created
world-writable nodes); ``tests/unit/test_zk_client_factory.py`` proves no other construction exists.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import AuthFailedError
from kazoo.protocol.serialization import CheckVersion, Create, Delete, SetData
from kazoo.protocol.states import KeeperState
from kazoo.security import OPEN_ACL_UNSAFE

from balancer.errors import InvalidInput
from service.zookeeper.session.hosts import check_hosts
from service.zookeeper.session.poll_handler import PollHandler
from service.zookeeper.session.security import ZkSecurity

# The session states after which start() has its answer: connected, or the login refused.
_SETTLING = (KeeperState.CONNECTED, KeeperState.CONNECTED_RO, KeeperState.AUTH_FAILED)


def plain_path(path: Any) -> bool:
    """``path`` is absolute and already in kazoo's normal form (no empty, ``.`` or ``..`` part, no
    trailing slash): what kazoo's normalisation would return unchanged when there is no chroot."""
    return (
        type(path) is str
        and len(path) > 1
        and path[0] == "/"
        and path[-1] != "/"
        and "//" not in path
        and "/./" not in path
        and "/../" not in path
        and not path.endswith(("/.", "/.."))
    )


class Transaction(TransactionRequest):  # type: ignore[misc]
    """kazoo's transaction builder, without normalising a path already normal on a client without a
    chroot. A whole-plan cycle writes 42,000 operations (an assignment and its hint per move), each
    split, rejoined and re-split by kazoo's ``_prefix_root`` on the leader's thread while the
    connection thread competes for the interpreter; every other case (a chroot, any other path or
    argument) goes through kazoo's own checks. The same request either way
    (``tests/unit/test_zk_transaction.py``)."""

    def create(
        self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False, sequence: bool = False
    ) -> None:
        if (
            self.client.chroot
            or not plain_path(path)
            or type(value) is not bytes
            or type(ephemeral) is not bool
            or type(sequence) is not bool
            or (acl is not None and not isinstance(acl, (tuple, list)))
        ):
            super().create(path, value, acl, ephemeral, sequence)
            return
        if acl is None:
            acl = self.client.default_acl or OPEN_ACL_UNSAFE
        self._add(Create(path, value, acl, (1 if ephemeral else 0) | (2 if sequence else 0)), None)

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        if self.client.chroot or not plain_path(path) or type(value) is not bytes or type(version) is not int:
            super().set_data(path, value, version)
            return
        self._add(SetData(path, value, version))

    def delete(self, path: str, version: int = -1) -> None:
        if self.client.chroot or not plain_path(path) or type(version) is not int:
            super().delete(path, version)
            return
        self._add(Delete(path, version))

    def check(self, path: str, version: int) -> None:
        if self.client.chroot or not plain_path(path) or type(version) is not int:
            super().check(path, version)
            return
        self._add(CheckVersion(path, version))


class Client(KazooClient):  # type: ignore[misc]
    """A kazoo client whose ``start()`` reports a refused login as soon as the server refuses it.

    kazoo's ``start()`` waits only for the session to go live, and the connection thread sets it live
    *before* the SASL exchange, then clears it again when the server refuses the login. On a loaded
    machine both can happen before ``start()`` begins to wait, and kazoo then waits out its whole
    timeout and reports a connection time-out, with the state already CLOSED. Here ``start()`` waits
    for connected *or* refused, and ``login_refused`` keeps the one fact that tells a refusal from an
    unreachable server even after the state has moved on to CLOSED.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.login_refused = False
        # Set by the connection thread after each state change start() may stop waiting for.
        self._settled = threading.Event()

    def transaction(self) -> Transaction:
        return Transaction(self)

    def _session_callback(self, state: Any) -> None:
        if state == KeeperState.AUTH_FAILED:
            self.login_refused = True
        super()._session_callback(state)
        # After kazoo's own bookkeeping, so a woken start() sees the session as it now is.
        if state in _SETTLING:
            self._settled.set()

    def start(self, timeout: float = 15) -> None:
        """Connect within ``timeout`` seconds, as kazoo's ``start()`` does, except that a refused login
        raises AuthFailedError the moment it arrives instead of a time-out once ``timeout`` has passed.

        Either failure stops the connection thread and frees the client's sockets before raising.
        """
        if self.connected:
            return
        self.login_refused = False
        self._settled.clear()
        self.start_async()
        deadline = time.monotonic() + timeout
        # The event is cleared before the state is looked at again: a change in between ends the next wait.
        while not (self.login_refused or self.connected):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._settled.wait(remaining)
            self._settled.clear()
        if self.login_refused or not self.connected:
            refused = self.login_refused
            self.stop()
            self.close()
            if refused:
                raise AuthFailedError("ZooKeeper refused the login")
            raise self.handler.timeout_exception("Connection time-out")
        if self.chroot and not self.exists("/"):
            # kazoo's start() says the same; kept so callers see no difference.
            warnings.warn(
                "No chroot path exists, the chroot path should be created before normal use.", stacklevel=2
            )


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
    return Client(
        hosts=hosts,
        timeout=timeout_s,
        client_id=client_id,
        handler=PollHandler(),  # a select() a tenth of kazoo's cost (see poll_handler)
        **security.kazoo_kwargs(),
    )
