"""The world-writable warning is said once per ZooKeeper and process, not once per session: the demo
opens a session per simulated broker and the leader's, and printed it six times (issue 34, point 4)."""

from __future__ import annotations

import logging

import pytest

from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session import nodes

pytestmark = pytest.mark.integration


def test_world_writable_warning_once_per_zookeeper(
    zk_chroot_hosts: str, caplog: pytest.LogCaptureFixture
) -> None:
    nodes._WARNED_OPEN.discard(zk_chroot_hosts)
    caplog.set_level(logging.WARNING, logger=nodes.__name__)
    stores = [ZkStore(zk_chroot_hosts, session_timeout_s=5) for _ in range(3)]
    try:
        for s in stores:
            s.start()
    finally:
        for s in stores:
            s.stop()
    said = [r for r in caplog.records if "world-writable" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
