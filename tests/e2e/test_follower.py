"""A second instance joins as a follower: it serves reads itself and forwards mutations to the leader."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from service.api import create_app
from service.demo.cluster import Demo, demo_config, free_port
from service.leader.service import LoadManagerService
from service.settings import Settings

pytestmark = pytest.mark.e2e


@pytest.fixture
def follower(demo: Demo) -> Iterator[str]:
    port = free_port(0)
    settings = Settings(
        zk_hosts=demo._zk.hosts,
        http_host="127.0.0.1",
        http_port=port,
        instance_id=f"follower-{port}",
        api_token=demo.opts.token,
        api_reads_open=True,
        history_enabled=False,
        zk_session_timeout_s=6.0,
    )
    service = LoadManagerService(settings, demo_config(demo.opts))
    service.start()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(service, settings), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        service.stop()


def test_follower_reads_locally_and_forwards_mutations(
    follower: str, demo: Demo, auth: dict[str, str], wait_for: Any
) -> None:
    with httpx.Client(base_url=follower, timeout=20) as f:
        leader = f.get("/leader").json()
        assert leader["isLeader"] is False and leader["leader"]["serviceUrl"] == demo.url
        assert wait_for(lambda: len(f.get("/bundles").json()) > 0)
        row = f.get("/bundles").json()[0]
        assert f.post(f"/bundles/{row['bundle']}/unload").status_code == 401
        dest = next(b for b in demo.broker_ids if b != row["owner"])
        r = f.post(f"/bundles/{row['bundle']}/unload", json={"destinationBroker": dest}, headers=auth)
        assert r.status_code == 200, r.text
        assert r.headers["x-loadmgr-served-by"] == demo.url
        assert r.json()["decision"]["destination"] == dest
        assert wait_for(lambda: f.get(f"/bundles/{row['bundle']}").json()["owner"] == dest)
