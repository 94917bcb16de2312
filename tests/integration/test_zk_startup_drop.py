"""A ZooKeeper connection that drops while loadmgr starts is waited out (issue 33 item 11): ``serve``
and ``agent`` start through :meth:`JsonZk.start`, which used to give up (exit 2) at the first
ConnectionLoss of its first requests, e.g. when ZooKeeper stalled two seconds after a restart."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.server.launcher import EmbeddedZooKeeper

pytestmark = pytest.mark.integration


def test_a_stall_right_after_connecting_is_waited_out(zk_server: EmbeddedZooKeeper) -> None:
    store = ZkStore(zk_server.hosts, session_timeout_s=4.0)
    real_start = store.client.start
    resumed = threading.Event()
    drops: list[str] = []

    def start_then_stall(*a: Any, **k: Any) -> None:
        real_start(*a, **k)
        # the session is up; now ZooKeeper stalls before the base paths are created
        zk_server.pause()
        store.client.add_listener(lambda state: drops.append(str(state)) and False)

        def resume_when_dropped() -> None:
            # resume only once the client saw the drop, however slow the machine is
            while "SUSPENDED" not in drops:
                threading.Event().wait(0.05)
            threading.Event().wait(0.5)
            zk_server.resume()
            resumed.set()

        threading.Thread(target=resume_when_dropped, daemon=True).start()

    store.client.start = start_then_stall  # type: ignore[method-assign]
    try:
        store.start(timeout_s=60.0)
        assert resumed.is_set() and "SUSPENDED" in drops
        assert store.connected and store.client.exists("/loadbalance/brokers") is not None
    finally:
        if zk_server.paused:
            zk_server.resume()
        store.stop()
