"""Against a real ZooKeeper: the launcher itself, ephemeral broker registration and
watches, and client behaviour while the server is frozen (SIGSTOP)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import ZnodeStat

from service.zookeeper.server.launcher import EmbeddedZooKeeper, find_zookeeper_jars, java_version

pytestmark = pytest.mark.integration

BROKERS = "/loadbalance/brokers"
BROKER = "broker-1:8080"
WAIT_S = 15.0

ZkClientFactory = Callable[..., KazooClient]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_launcher_starts_and_answers_ruok(zk_server: EmbeddedZooKeeper) -> None:
    assert re.fullmatch(r"127\.0\.0\.1:\d+", zk_server.hosts)
    assert zk_server.command("ruok") == "imok"
    srvr = zk_server.command("srvr")
    assert "Mode: standalone" in srvr
    assert "zk_server_state\tstandalone" in zk_server.command("mntr")
    assert _pid_alive(zk_server.pid)
    assert java_version() is not None
    assert {"zookeeper", "zookeeper-jute"} <= {re.sub(r"-\d.*", "", j.name) for j in find_zookeeper_jars()}


def test_stop_kills_java_and_removes_temp_dir() -> None:
    zk = EmbeddedZooKeeper()
    zk.start()
    pid, log_path = zk.pid, zk.log_path
    assert log_path is not None and log_path.exists()
    zk.pause()  # stop() must also cope with a frozen JVM
    zk.stop()
    assert not _pid_alive(pid)
    assert not log_path.parent.exists()
    zk.stop()  # idempotent


def test_ephemeral_broker_node_vanishes_when_owner_session_closes(
    zk_client: KazooClient, zk_client_factory: ZkClientFactory
) -> None:
    payload = {
        "webServiceUrl": "http://broker-1:8080",
        "pulsarServiceUrl": "pulsar://broker-1:6650",
        "cpu": {"usage": 12.5, "limit": 100.0},
    }
    owner = zk_client_factory()
    owner.create(f"{BROKERS}/{BROKER}", json.dumps(payload).encode(), ephemeral=True, makepath=True)

    watcher = zk_client
    children_seen: list[list[str]] = []
    data_seen: list[bytes | None] = []
    registered, child_gone = threading.Event(), threading.Event()
    data_arrived, data_gone = threading.Event(), threading.Event()

    def on_children(children: list[str]) -> None:
        children_seen.append(sorted(children))
        if BROKER in children:
            registered.set()
        elif registered.is_set():
            child_gone.set()

    def on_data(data: bytes | None, stat: ZnodeStat | None) -> None:
        data_seen.append(data)
        if data is not None:
            data_arrived.set()
        elif data_arrived.is_set():
            data_gone.set()

    watcher.ChildrenWatch(BROKERS, on_children)
    watcher.DataWatch(f"{BROKERS}/{BROKER}", on_data)

    assert registered.wait(WAIT_S), children_seen
    assert data_arrived.wait(WAIT_S), data_seen
    assert data_seen[-1] is not None and json.loads(data_seen[-1]) == payload

    # Closing the session (not just the socket) is what makes ZooKeeper drop the
    # ephemeral node at once rather than after the session timeout.
    owner.stop()
    owner.close()

    assert child_gone.wait(WAIT_S), f"children seen: {children_seen}"
    assert data_gone.wait(WAIT_S), f"data seen: {data_seen}"
    assert children_seen[-1] == []
    assert watcher.exists(f"{BROKERS}/{BROKER}") is None


def test_client_suspends_while_server_is_paused_and_reconnects(zk_server: EmbeddedZooKeeper) -> None:
    # kazoo pings every session/3 and declares the connection dropped after
    # 2/3 of the session timeout without an answer, so a 6 s session shows
    # SUSPENDED after 2-4 s of silence and leaves ~2 s before the server would
    # expire the session, so the same session must come back.
    client = KazooClient(hosts=zk_server.hosts, timeout=6.0)
    states: list[str] = []
    suspended, reconnected = threading.Event(), threading.Event()

    def on_state(state: str) -> None:
        states.append(state)
        if state == KazooState.SUSPENDED:
            suspended.set()
        elif state == KazooState.CONNECTED and suspended.is_set():
            reconnected.set()

    client.add_listener(on_state)
    client.start(timeout=WAIT_S)
    try:
        client.create("/owner", b"x", ephemeral=True)
        session_id = client.client_id[0]

        paused_at = time.monotonic()
        zk_server.pause()
        try:
            assert suspended.wait(10.0), f"no SUSPENDED while paused; states: {states}"
            paused_for = time.monotonic() - paused_at
        finally:
            zk_server.resume()

        assert reconnected.wait(WAIT_S), f"no CONNECTED after resume; states: {states}"
        assert client.state == KazooState.CONNECTED
        assert KazooState.LOST not in states, f"session expired after a {paused_for:.1f}s pause"
        assert client.client_id[0] == session_id
        assert client.exists("/owner") is not None
        assert 1.0 < paused_for < 6.0
    finally:
        client.stop()
        client.close()
