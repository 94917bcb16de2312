"""On a real leader and ZooKeeper: every mutating route refuses read-only and missing tokens, and
no route at all changes ZooKeeper when called with the read token, an assigning lookup included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kazoo.client import KazooClient

from balancer.models import LocalBrokerData
from service.api import create_app
from service.api.metrics import PrometheusMetrics
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

ADMIN, READ = "authz-admin-token", "authz-read-token"
A = {"Authorization": f"Bearer {ADMIN}"}
R = {"Authorization": f"Bearer {READ}"}
NS1, NS2 = "public/one", "public/two"
TOPIC = f"persistent://{NS2}/orders"


def _snapshot(client: KazooClient, path: str = "/") -> dict[str, tuple[int, int]]:
    """Every node with its data and children versions: any write anywhere changes this."""
    out: dict[str, tuple[int, int]] = {}
    for child in client.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        _, stat = client.get(full)
        out[full] = (stat.mzxid, stat.pzxid)
        out.update(_snapshot(client, full))
    return out


@pytest.fixture
def leader(cluster: Cluster) -> Iterator[LoadManagerService]:
    # Long intervals: no scheduled job writes during the test, so any write would be a route's.
    config = fast_config(
        loadBalancerSheddingIntervalMinutes=10.0, loadBalancerResourceQuotaUpdateIntervalMinutes=10.0
    )
    cluster.admin.register_broker("b1:8080", LocalBrokerData(web_service_url="http://b1:8080"))
    cluster.admin.create_namespace(NS1, 2)
    settings = Settings(
        zk_hosts=cluster.hosts,
        zk_chroot="",
        zk_session_timeout_s=4.0,
        instance_id="lm-1",
        api_token=ADMIN,
        api_read_token=READ,
        history_enabled=False,
    )
    svc = LoadManagerService(settings, config, seed=1)
    svc.start()
    try:
        wait_for(svc.is_leader, 20, what="leadership")
        # the reconcile run on winning assigns NS1; NS2 comes after it and stays unassigned
        wait_for(lambda: len(cluster.admin.read_assignments()) == 2, 20, what="initial reconcile")
        cluster.admin.create_namespace(NS2, 2)
        yield svc
    finally:
        svc.stop()


def _calls(bundle: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        ("GET", "/brokers", {}),
        ("GET", "/brokers/b1:8080", {}),
        ("GET", "/bundles", {}),
        ("GET", f"/bundles/{bundle}", {}),
        ("GET", f"/lookup/{TOPIC}", {}),
        ("GET", "/leader", {}),
        ("GET", "/config", {}),
        ("GET", "/decisions", {}),
        ("POST", "/shedding/dry-run", {}),
        ("POST", f"/bundles/{bundle}/unload", {"json": {"destinationBroker": "b1:8080"}}),
        ("POST", f"/bundles/{bundle}/split", {"json": {"algorithm": "range_equally_divide"}}),
        ("PUT", "/config", {"json": {"loadBalancerSheddingIntervalMinutes": 3}}),
        ("GET", "/namespaces", {}),
        ("POST", "/namespaces/public/fresh", {"json": {"bundles": 2}}),
        ("PUT", "/namespaces/public/fresh/policies", {"json": {"namespaceAntiAffinityGroup": "g"}}),
        ("DELETE", f"/namespaces/{NS1}", {}),
        ("GET", "/maintenance", {}),
        ("POST", "/brokers/b1:8080/cordon", {}),
        ("POST", "/brokers/b1:8080/uncordon", {}),
        ("POST", "/brokers/b1:8080/drain", {"json": {"thenShutdown": False}}),
        ("POST", "/brokers/b1:8080/drain/stop", {}),
    ]


def _answer(client: TestClient, method: str, path: str, **kw: Any) -> int:
    """The status of a call, retried as a client would while it is 503 with Retry-After: on a loaded
    machine the 4 s session may be suspended for a moment (ZooKeeper unavailable, not an answer)."""
    answers: list[int] = []

    def settled() -> bool:
        r = client.request(method, path, **kw)
        answers.append(r.status_code)
        return not (r.status_code == 503 and "retry-after" in r.headers)

    wait_for(settled, 30, interval=0.5, what=f"{method} {path} to answer other than 503")
    return answers[-1]


def test_read_and_missing_tokens_change_nothing(leader: LoadManagerService, zk_client: KazooClient) -> None:
    app = create_app(leader, leader.settings, PrometheusMetrics().registry)
    client = TestClient(app, base_url="http://127.0.0.1")
    bundle = leader.store.read_layout(NS2).value.bundle_names[0]  # type: ignore[union-attr]
    documented = {(m.upper(), p) for p, ops in client.app.openapi()["paths"].items() for m in ops}  # type: ignore[attr-defined]
    mutating = {(m, p) for m, p in documented if m in {"POST", "PUT", "PATCH", "DELETE"}}
    assert mutating == {
        ("POST", "/bundles/{bundle}/unload"),
        ("POST", "/bundles/{bundle}/split"),
        ("PUT", "/config"),
        ("POST", "/shedding/dry-run"),
        ("POST", "/namespaces/{tenant}/{namespace}"),
        ("DELETE", "/namespaces/{tenant}/{namespace}"),
        ("PUT", "/namespaces/{tenant}/{namespace}/policies"),
        ("POST", "/brokers/{broker}/cordon"),
        ("POST", "/brokers/{broker}/uncordon"),
        ("POST", "/brokers/{broker}/drain"),
        ("POST", "/brokers/{broker}/drain/stop"),
    }, "a new mutating route must be added to _calls"
    before = _snapshot(zk_client)
    config_before, decisions_before = leader.config, leader.decisions()
    statuses: dict[tuple[str, str], tuple[int, int]] = {}
    for method, path, kw in _calls(bundle):
        missing = _answer(client, method, path, **kw)
        read = _answer(client, method, path, headers=R, **kw)
        statuses[(method, path)] = (missing, read)
    expected_read = {
        ("POST", f"/bundles/{bundle}/unload"): 403,
        ("POST", f"/bundles/{bundle}/split"): 403,
        ("PUT", "/config"): 403,
        ("GET", f"/lookup/{TOPIC}"): 403,  # the bundle is unowned: answering would assign it
        ("POST", "/namespaces/public/fresh"): 403,
        ("PUT", "/namespaces/public/fresh/policies"): 403,
        ("DELETE", f"/namespaces/{NS1}"): 403,
        ("POST", "/brokers/b1:8080/cordon"): 403,
        ("POST", "/brokers/b1:8080/uncordon"): 403,
        ("POST", "/brokers/b1:8080/drain"): 403,
        ("POST", "/brokers/b1:8080/drain/stop"): 403,
    }
    for call, (missing, read) in statuses.items():
        assert missing == 401, call
        assert read == expected_read.get(call, 200), (call, read)  # reads and the dry run: 200
    assert _snapshot(zk_client) == before, "a read or unauthenticated call wrote to ZooKeeper"
    assert leader.config == config_before and leader.decisions() == decisions_before

    # control: the same lookup with the admin token does assign, so the snapshot would have caught it
    r = client.get(f"/lookup/{TOPIC}", headers=A)
    assert r.status_code == 200 and r.json()["broker"] == "b1:8080", r.text
    assert _snapshot(zk_client) != before
    assert P.assignment_path(r.json()["bundle"]) in _snapshot(zk_client)
    caused = leader.decisions(kind="manual")[0]
    assert caused.explanation["reason"] == "lookup_assigned" and (caused.principal or "").startswith(
        "admin sha256:"
    )
    r = client.put("/config", json={"loadBalancerSheddingIntervalMinutes": 3}, headers=A)
    assert r.status_code == 200
    assert leader.decisions()[0].principal is not None and leader.decisions()[0].principal.startswith(
        "admin "
    )
