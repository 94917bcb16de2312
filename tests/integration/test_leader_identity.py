"""A forged or rewritten ``/loadbalance/leader`` never receives a forwarded request or a token.

Three ways in: on a secured ZooKeeper an anonymous client cannot touch the node at all; on an open
one an attacker can write the node before any loadmgr runs (a foreign leader), or rewrite a real
leader's node in place. A follower asked for a mutation, with the admin token, must refuse in each
case, while forwarding to the real, verified leader still works.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from service.api import create_app
from service.leader.identity import SIGNATURE_KEY
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.server.process import free_port
from tests.integration.conftest import fast_config, wait_for
from tests.integration.servers import Trap, served

pytestmark = pytest.mark.integration

TOKEN = "admin-token-for-identity-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BUNDLE = "public/default/0x00000000_0x40000000"


def _service(hosts: str, name: str, port: int, **kw: Any) -> LoadManagerService:
    settings = Settings(
        zk_hosts=hosts,
        zk_chroot="",
        zk_session_timeout_s=4.0,
        instance_id=name,
        http_port=port,
        api_token=TOKEN,
        history_enabled=False,
        **kw,
    )
    svc = LoadManagerService(settings, fast_config(), seed=1)
    svc.start()
    return svc


@pytest.fixture
def services() -> Iterator[list[LoadManagerService]]:
    started: list[LoadManagerService] = []
    yield started
    for svc in started:
        svc.stop()


def _follower_client(svc: LoadManagerService) -> TestClient:
    return TestClient(create_app(svc, svc.settings), base_url="http://127.0.0.1")


def _ask(client: TestClient) -> list[Any]:
    """The mutations an operator might send to a follower, each with the admin token."""
    return [
        client.post(f"/bundles/{BUNDLE}/unload", headers=AUTH),
        client.post(f"/bundles/{BUNDLE}/split", headers=AUTH, json={"algorithm": "range_equally_divide"}),
    ]


def test_secured_zookeeper_anonymous_cannot_touch_the_leader_node(
    zk_chroot_hosts: str, zk_client: KazooClient, services: list[LoadManagerService]
) -> None:
    port = free_port()
    leader = _service(zk_chroot_hosts, "lm-1", port, zk_auth="loadmgr:pw")
    services.append(leader)
    wait_for(leader.is_leader, 20, what="leadership")
    before = zk_client.get(P.LEADER)[0]
    with pytest.raises(NoAuthError):
        zk_client.set(P.LEADER, json.dumps({"brokerId": "x", "serviceUrl": "http://127.0.0.1:9"}).encode())
    with pytest.raises(NoAuthError):
        zk_client.delete(P.LEADER)
    assert zk_client.get(P.LEADER)[0] == before and json.loads(before)[SIGNATURE_KEY]


def test_foreign_leader_node_gets_nothing(
    zk_chroot_hosts: str, zk_client: KazooClient, services: list[LoadManagerService]
) -> None:
    with Trap() as trap:
        # written before any loadmgr runs, on an open ZooKeeper, with a made-up signature
        forged = {"brokerId": "lm-evil", "serviceUrl": trap.url, SIGNATURE_KEY: "00" * 32}
        zk_client.create(P.LEADER, json.dumps(forged).encode(), ephemeral=True, makepath=True)
        # The forged node looks like a Pulsar broker's: the mode is named so serve starts beside it.
        follower = _service(zk_chroot_hosts, "lm-2", free_port(), mode="zookeeper")
        services.append(follower)
        wait_for(lambda: follower.leader_info() is not None, 10, what="the follower reads the node")
        assert not follower.is_leader()
        answers = _ask(_follower_client(follower))
        assert [r.status_code for r in answers] == [503, 503]
        assert all("signature" in r.json()["detail"]["reason"] for r in answers)
        assert trap.requests == []


def test_rewritten_leader_node_gets_nothing_and_is_restored(
    zk_chroot_hosts: str, zk_client: KazooClient, services: list[LoadManagerService]
) -> None:
    leader_port = free_port()
    leader = _service(zk_chroot_hosts, "lm-1", leader_port)
    services.append(leader)
    wait_for(leader.is_leader, 20, what="leadership")
    follower = _service(zk_chroot_hosts, "lm-2", free_port())
    services.append(follower)
    client = _follower_client(follower)
    with Trap() as trap, served(create_app(leader, leader.settings), leader_port):
        # control: the real leader's node verifies and the follower forwards to it
        r = client.post(f"/bundles/{BUNDLE}/unload", headers=AUTH)
        assert r.headers.get("x-loadmgr-served-by") == f"http://127.0.0.1:{leader_port}", r.text
        genuine = zk_client.get(P.LEADER)[0]
        # hold the leader's election step (it would restore the node within a second) so the
        # follower surely sees the forged content; wake() below lets it run again
        leader.election._retry_s = 60.0
        time.sleep(1.5)
        # the ZooKeeper is open (no zk_auth), so anyone may rewrite the content of the leader's node
        rewritten = {**json.loads(genuine), "serviceUrl": trap.url}
        zk_client.set(P.LEADER, json.dumps(rewritten).encode())
        answers = _ask(client)
        assert [r.status_code for r in answers] == [503, 503], [r.text for r in answers]
        assert "x-loadmgr-served-by" not in answers[0].headers
        # the leader notices at its next election step and puts its own content back
        leader.election.wake()
        wait_for(lambda: zk_client.get(P.LEADER)[0] == genuine, 10, what="the leader restores its node")
        assert leader.is_leader()
        r = client.post(f"/bundles/{BUNDLE}/unload", headers=AUTH)
        assert r.headers.get("x-loadmgr-served-by") == f"http://127.0.0.1:{leader_port}"
        assert trap.requests == []


def test_replayed_leader_node_gets_nothing(
    zk_chroot_hosts: str, zk_client: KazooClient, services: list[LoadManagerService]
) -> None:
    """Issue 33 item 1: record leader A's signed node, let A die and B win, then recreate the node as
    one's own ephemeral node holding A's bytes while listening on A's address: no follower forwards
    to it (the signature binds A's session and epoch; the node's Stat shows another owner)."""
    with Trap() as trap:
        a_port = int(trap.url.rsplit(":", 1)[1])
        a = _service(zk_chroot_hosts, "lm-a", a_port)  # A's address is where the attacker listens
        wait_for(a.is_leader, 20, what="A leads")
        b = _service(zk_chroot_hosts, "lm-b", free_port())
        services.append(b)
        recorded = zk_client.get(P.LEADER)[0]
        assert json.loads(recorded)[SIGNATURE_KEY]
        a.stop()
        wait_for(b.is_leader, 20, what="B wins after A dies")
        # the attacker has write access (an open ZooKeeper): B's node replaced by A's recorded bytes
        zk_client.delete(P.LEADER)
        zk_client.create(P.LEADER, recorded, ephemeral=True)
        wait_for(lambda: not b.is_leader(), 10, what="B sees the node is no longer its own")
        assert zk_client.get(P.LEADER)[0] == recorded
        answers = _ask(_follower_client(b))
        assert [r.status_code for r in answers] == [503, 503], [r.text for r in answers]
        assert all("signature" in r.json()["detail"]["reason"] for r in answers), [r.text for r in answers]
        assert trap.requests == []
        # the attacker's session goes: B wins again, signs for its new epoch, and forwarding resumes
        zk_client.delete(P.LEADER)
        wait_for(b.is_leader, 20, what="B leads again")
        url, why, _ = b.election.verified_leader()
        assert url is not None and why == "", why
