"""A refused SASL login is reported as refused credentials, not as an unreachable ZooKeeper.

kazoo's ``start()`` marks the session live before the SASL exchange; when the server's refusal arrives
before ``start()`` checks the session again (seen in CI under load), kazoo raises a connection
time-out and its state already says CLOSED. The store must still name the refused login.
"""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KeeperState

from service.errors import StoreUnavailable, ZkAccessDenied
from service.settings import Settings
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.client import new_client
from service.zookeeper.session.security import ZkSecurity


def _store(scheme: str = "sasl") -> ZkStore:
    settings = Settings(zk_auth="loadmgr:wrong", zk_auth_scheme=scheme)
    return ZkStore("127.0.0.1:1", session_timeout_s=4.0, security=ZkSecurity.from_settings(settings))


def _start_that_loses_the_race(client: Any, refused: bool) -> Any:
    def start(timeout: float = 15) -> None:
        client._session_callback(KeeperState.CONNECTED)
        if refused:
            client._session_callback(KeeperState.AUTH_FAILED)
        client._session_callback(KeeperState.CLOSED)
        raise KazooTimeoutError("Connection time-out")

    return start


def test_the_client_remembers_a_refusal_after_the_session_closed() -> None:
    client = new_client("127.0.0.1:1", ZkSecurity.from_settings(Settings()), 4.0)
    assert client.login_refused is False
    client._session_callback(KeeperState.CONNECTED)
    client._session_callback(KeeperState.AUTH_FAILED)
    client._session_callback(KeeperState.CLOSED)
    assert client.client_state == KeeperState.CLOSED
    assert client.login_refused is True


def test_a_refusal_that_beats_start_is_reported_as_refused_credentials() -> None:
    store = _store()
    store.client.start = _start_that_loses_the_race(store.client, refused=True)  # type: ignore[method-assign]
    with pytest.raises(ZkAccessDenied, match="refused authentication of SASL DIGEST-MD5 user 'loadmgr'"):
        store.start()


def test_a_plain_time_out_is_still_unreachable() -> None:
    store = _store()
    store.client.start = _start_that_loses_the_race(store.client, refused=False)  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable, match=r"cannot connect to ZooKeeper at 127\.0\.0\.1:1") as e:
        store.start()
    assert not isinstance(e.value, ZkAccessDenied)
