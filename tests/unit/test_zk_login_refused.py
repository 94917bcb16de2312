"""A refused SASL login is reported as refused credentials, not as an unreachable ZooKeeper.

kazoo's ``start()`` marks the session live before the SASL exchange; when the server's refusal arrives
before ``start()`` checks the session again (seen in CI under load), kazoo raises a connection
time-out and its state already says CLOSED. The store must still name the refused login, and at
once: when the connection thread connected and was refused before kazoo's ``start()`` even began to
wait, kazoo waited out its whole connect timeout (15 s, seen with ``stress-ng --cpu 4`` beside the
suite). These fakes play the connection thread's state changes without a server.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kazoo.exceptions import AuthFailedError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KeeperState

from service.errors import StoreUnavailable, ZkAccessDenied
from service.settings import Settings
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.client import new_client
from service.zookeeper.session.security import ZkSecurity
from tests.timing import scaled


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


def _client() -> Any:
    return new_client("127.0.0.1:1", ZkSecurity.from_settings(Settings()), 4.0)


def _fake_connection(client: Any, *states: KeeperState, delay_s: float = 0.0) -> None:
    """``client.start_async`` plays ``states`` as the connection thread would (after ``delay_s`` on a
    thread of its own; at once, before ``start()`` waits, without one)."""

    def play() -> None:
        time.sleep(delay_s)
        for state in states:
            client._session_callback(state)

    def start_async() -> Any:
        if delay_s:
            threading.Thread(target=play, daemon=True).start()
        else:
            play()
        return client._live

    client.start_async = start_async


REFUSED = (KeeperState.CONNECTED, KeeperState.AUTH_FAILED, KeeperState.CLOSED)
# The wait a refused start() must not sit out: far beyond any budget below, however loaded the machine.
LONG_S = 60.0


def test_a_refusal_before_start_waits_is_raised_at_once() -> None:
    client = _client()
    _fake_connection(client, *REFUSED)
    started = time.monotonic()
    with pytest.raises(AuthFailedError):
        client.start(timeout=LONG_S)
    assert time.monotonic() - started < scaled(1.0)  # kazoo's own start() waited the whole time-out here
    assert not client.connected and client.login_refused


def test_a_refusal_while_start_waits_is_raised_at_once() -> None:
    client = _client()
    _fake_connection(client, KeeperState.CONNECTING, KeeperState.AUTH_FAILED, KeeperState.CLOSED, delay_s=0.2)
    started = time.monotonic()
    with pytest.raises(AuthFailedError):
        client.start(timeout=LONG_S)
    assert time.monotonic() - started < 0.2 + scaled(1.0)


def test_start_returns_when_connected_and_times_out_when_nothing_answers() -> None:
    client = _client()
    _fake_connection(client, KeeperState.CONNECTED, delay_s=0.1)
    client.start(timeout=LONG_S)
    assert client.connected and not client.login_refused
    quiet = _client()
    _fake_connection(quiet, KeeperState.CONNECTING, KeeperState.CONNECTED, KeeperState.CONNECTING)
    started = time.monotonic()
    with pytest.raises(KazooTimeoutError):
        quiet.start(timeout=0.5)
    # a connection that dropped again is waited for until the time-out, as kazoo's start() did
    assert 0.5 <= time.monotonic() - started < 0.5 + scaled(1.0)
    assert not quiet.login_refused


def test_the_store_reports_a_refusal_that_beats_start_without_waiting() -> None:
    store = _store()
    _fake_connection(store.client, *REFUSED)
    started = time.monotonic()
    with pytest.raises(ZkAccessDenied, match="refused authentication of SASL DIGEST-MD5 user 'loadmgr'") as e:
        store.start(timeout_s=LONG_S)
    assert time.monotonic() - started < scaled(1.0) and "\n" not in str(e.value)


def test_a_refusal_after_start_returned_is_not_retried_as_a_dropped_connection() -> None:
    # start() returned connected; the refusal and the close came before the first request, which kazoo
    # then fails as a closed connection, not as AUTH_FAILED.
    store = _store()

    def start(timeout: float = 15) -> None:
        store.client._session_callback(KeeperState.CONNECTED)
        for state in REFUSED[1:]:
            store.client._session_callback(state)

    store.client.start = start  # type: ignore[method-assign]
    started = time.monotonic()
    with pytest.raises(ZkAccessDenied, match="refused authentication of SASL DIGEST-MD5 user 'loadmgr'"):
        store.start(timeout_s=1.0)
    # Not retried until the 4 s session timeout (a bound that stretches with the machine's load).
    assert time.monotonic() - started < min(scaled(1.0), 3.0)
