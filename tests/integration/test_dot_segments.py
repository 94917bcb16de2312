"""Names that are ``.`` or ``..`` never reach ZooKeeper as a relative path (which it refuses, and
which was a 500): lookups and namespace routes answer 4xx naming the value (issue 33, items 4, 5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from balancer.errors import InvalidInput
from balancer.models import LocalBrokerData
from service.api import create_app
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.namespaces import check_namespace
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

ADMIN, READ = "dots-admin-token", "dots-read-token"
A = {"Authorization": f"Bearer {ADMIN}"}
R = {"Authorization": f"Bearer {READ}"}

LOOKUPS = [
    "/lookup/persistent://public/default/%2e%2e%2f%2e%2e%2fx",
    "/lookup/persistent://public/default/..%2f..%2fx",
    "/lookup/persistent/public/default/%2e%2e%2f%2e%2e%2fx",
    "/lookup/persistent://public/%2e%2e/x",
    "/lookup/persistent://%2e%2e/default/x",
    "/lookup/public/default/%2E%2E%2Fx",
    "/lookup/persistent://public/default/.%2e/.%2e/x",
]
NAMESPACES = [
    "/namespaces/fz/%2e%2e",
    "/namespaces/fz/%2E%2E",
    "/namespaces/fz/.%2e",
    "/namespaces/fz/%2e.",
    "/namespaces/fz/%2e",
    "/namespaces/%2e%2e/fz",
    "/namespaces/%2e/fz",
    "/namespaces/%2e%2e/%2e%2e",
]


@pytest.fixture
def client(cluster: Cluster) -> Iterator[TestClient]:
    cluster.admin.register_broker("b1:8080", LocalBrokerData(web_service_url="http://b1:8080"))
    cluster.admin.create_namespace("public/default", 2)
    settings = Settings(
        zk_hosts=cluster.hosts,
        zk_chroot="",
        zk_session_timeout_s=4.0,
        instance_id="lm-dots",
        api_token=ADMIN,
        api_read_token=READ,
        history_enabled=False,
    )
    svc = LoadManagerService(settings, fast_config(), seed=1)
    svc.start()
    try:
        wait_for(svc.is_leader, 20, what="leadership")
        yield TestClient(create_app(svc, settings), base_url="http://127.0.0.1")
    finally:
        svc.stop()


def test_dot_segments_are_refused_with_4xx(client: TestClient, cluster: Cluster) -> None:
    for url in LOOKUPS:
        for headers in (R, A):
            r = client.get(url, headers=headers)
            assert 400 <= r.status_code < 500, (url, r.status_code, r.text)
    for url in NAMESPACES:
        for method in ("POST", "DELETE"):
            r = client.request(method, url, headers=A, json={"bundles": 2} if method == "POST" else None)
            assert 400 <= r.status_code < 500, (method, url, r.status_code, r.text)
    # control: a real lookup and a real namespace still work
    r = client.get("/lookup/persistent://public/default/x", headers=A)
    assert r.status_code == 200 and r.json()["broker"] == "b1:8080", r.text
    assert client.post("/namespaces/fz/ok", headers=A, json={"bundles": 2}).status_code == 201
    assert client.delete("/namespaces/fz/ok", headers=A).status_code == 204


def test_the_checks_behind_them() -> None:
    for bad in ("fz/..", "fz/.", "../fz", "./."):
        with pytest.raises(InvalidInput, match="namespace"):
            check_namespace(bad)
    assert check_namespace("fz/...") == ("fz", "...")  # "..." is a name to ZooKeeper
    with pytest.raises(InvalidInput, match="path"):
        P.policies_path("public/../x")
