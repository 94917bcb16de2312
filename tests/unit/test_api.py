"""The REST layer against an in-memory stand-in for the runtime: status codes, shapes, auth, errors."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from balancer.bundles import NamespaceBundles, split_bundle_name
from balancer.config import LoadBalancerConfig
from balancer.cycle import Move
from balancer.errors import InvalidInput, PreconditionFailed, UnknownBroker, UnknownBundle
from balancer.explain import explain
from balancer.models import BundleData, LocalBrokerData, ResourceUsage
from service.api import create_app
from service.api.errors import FORWARD_TIMEOUT
from service.api.metrics import PrometheusMetrics
from service.errors import NotLeader
from service.settings import Settings

NS = "public/default"


class FakeService:
    def __init__(self, leader: bool = True) -> None:
        self.leader = leader
        self.config = LoadBalancerConfig()
        layout = NamespaceBundles.initial(NS, 4)
        self.bundles = layout.bundle_names
        self.layout = layout
        self.owners = {b: ("b1" if i < 3 else "b2") for i, b in enumerate(self.bundles)}
        self.log: list[dict[str, Any]] = []
        self.split_unloads: list[bool] = []
        self.unready: list[str] = []

    def _require_leader(self) -> None:
        if not self.leader:
            raise NotLeader(None)

    def view(self) -> Any:
        brokers = {}
        for name, cpu in (("b1", 90.0), ("b2", 10.0)):
            owned = {b for b, o in self.owners.items() if o == name}
            brokers[name] = LocalBrokerData(
                cpu=ResourceUsage(usage=cpu, limit=100), bundles=owned, msg_rate_in=cpu
            )
        return SimpleNamespace(
            brokers=brokers,
            bundle_data={b: BundleData() for b in self.bundles},
            owners=dict(self.owners),
            namespaces={NS: self.layout},
            recently_unloaded={},
        )

    def is_leader(self) -> bool:
        return self.leader

    def leader_info(self) -> dict[str, Any] | None:
        return {"id": "me", "url": "http://127.0.0.1:1"} if self.leader else None

    def readiness(self) -> dict[str, Any]:
        return {"zookeeper": "CONNECTED", "leader": True}

    def ready(self) -> bool:
        return not self.not_ready_reasons()

    def not_ready_reasons(self) -> list[str]:
        return list(self.unready)

    def update_config(self, updates: dict[str, Any], principal: str | None = None) -> LoadBalancerConfig:
        self._require_leader()
        self.config = self.config.with_updates(updates, dynamic_only=True)
        return self.config

    def unload(
        self, bundle: str, destination: str | None = None, principal: str | None = None
    ) -> dict[str, Any]:
        self._require_leader()
        if bundle not in self.owners:
            raise UnknownBundle(bundle)
        if destination is not None and destination not in ("b1", "b2"):
            raise UnknownBroker(destination)
        src = self.owners[bundle]
        dst = destination or ("b2" if src == "b1" else "b1")
        self.owners[bundle] = dst
        rec = {"kind": "manual", "bundle": bundle, "source": src, "destination": dst, "principal": principal}
        self.log.append(rec)
        return rec

    def split(
        self,
        bundle: str,
        algorithm: str | None = None,
        positions: list[int] | None = None,
        principal: str | None = None,
        unload: bool = False,
    ) -> dict[str, Any]:
        self._require_leader()
        self.split_unloads.append(unload)
        if bundle not in self.owners:
            raise UnknownBundle(bundle)
        if algorithm == "flow_or_qps_equally_divide":  # as if the config left it out
            raise PreconditionFailed("algorithm", algorithm, "unsupported namespace bundle split algorithm")
        if positions is not None and any(p < 0 for p in positions):
            raise InvalidInput("positions", positions, "must be within the bundle's range")
        _, rng = split_bundle_name(bundle)
        self.layout = self.layout.split(rng, [rng.lower + (rng.upper - rng.lower) // 2])
        owner = self.owners.pop(bundle)
        self.bundles = self.layout.bundle_names
        for b in self.bundles:
            self.owners.setdefault(b, owner)
        return {"kind": "split", "bundle": bundle}

    def dry_run(self) -> Any:
        # The cycle's own slotted Move, which a generic JSON encoder cannot serialise.
        why = explain("Overloaded", "b1 above the threshold", subject=self.bundles[0], usage=0.93)
        return SimpleNamespace(moves=[Move(self.bundles[0], "b1", "b2", why)], skipped=[])

    def lookup(self, topic: str, assign: bool = True, principal: str | None = None) -> str:
        return "b1"

    def decisions(self, limit: int = 100, kind: str | None = None) -> list[dict[str, Any]]:
        return [d for d in self.log if kind is None or d["kind"] == kind][-limit:]


@pytest.fixture
def svc() -> FakeService:
    return FakeService()


@pytest.fixture
def client(svc: FakeService) -> TestClient:
    settings = Settings(api_token="s3cret", api_reads_open=True)
    return TestClient(create_app(svc, settings, PrometheusMetrics().registry), base_url="http://127.0.0.1")


AUTH = {"Authorization": "Bearer s3cret"}


def test_reads(client: TestClient, svc: FakeService) -> None:
    brokers = client.get("/brokers").json()
    assert [b["broker"] for b in brokers] == ["b1", "b2"]
    assert brokers[0]["scores"]["OverloadShedder"] == pytest.approx(0.9)
    one = client.get("/brokers/b2").json()
    assert one["bundles"] == [svc.bundles[3]]
    assert client.get("/brokers/nope").status_code == 404
    assert len(client.get("/bundles").json()) == 4
    assert [r["bundle"] for r in client.get("/bundles", params={"broker": "b2"}).json()] == [svc.bundles[3]]
    # issue 49: a namespace without bundles is the caller's mistake, not an empty list
    assert client.get("/bundles", params={"namespace": "other/ns"}).status_code == 404
    assert client.get("/bundles", params={"namespace": "public"}).status_code == 422
    detail = client.get(f"/bundles/{svc.bundles[0]}").json()
    assert detail["owner"] == "b1" and "shortTermData" in detail["bundleData"]
    r = client.get("/bundles/public/default/0x00000000_0x00000001")
    assert r.status_code == 404 and r.json()["error"] == "UnknownBundle"


def test_lookup_leader_config_health(client: TestClient, svc: FakeService) -> None:
    r = client.get("/lookup/persistent://public/default/t1").json()
    assert r["broker"] == "b1" and r["bundle"].startswith(NS + "/0x")
    assert client.get("/lookup/persistent/public/default/t1").json() == r
    assert client.get("/lookup/a/b/c/d/e").status_code == 422
    assert client.get("/leader").json()["isLeader"] is True
    cfg = client.get("/config").json()
    assert "loadBalancerSheddingIntervalMinutes" in cfg["dynamicKeys"]
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    svc.unready = ["shedding job failed 3 times in a row"]
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["details"]["reasons"] == svc.unready
    svc.unready = []
    assert b"loadmgr_is_leader" in client.get("/metrics").content


def test_mutations_need_the_token(client: TestClient, svc: FakeService) -> None:
    b = svc.bundles[0]
    assert client.post(f"/bundles/{b}/unload").status_code == 401
    assert client.post(f"/bundles/{b}/unload", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.put("/config", json={"loadBalancerSheddingIntervalMinutes": 2}).status_code == 401
    assert svc.owners[b] == "b1"


def test_unload_split_and_errors(client: TestClient, svc: FakeService) -> None:
    b = svc.bundles[0]
    r = client.post(f"/bundles/{b}/unload", json={"destinationBroker": "b2"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["decision"]["destination"] == "b2"
    assert svc.owners[b] == "b2"
    assert (
        client.post(f"/bundles/{b}/unload", json={"destinationBroker": "zz"}, headers=AUTH).status_code == 404
    )
    r = client.post(f"/bundles/{b}/split", json={"algorithm": "bogus"}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "algorithm"
    for bad in ([-1], [2**40], [0x40000000, 2**32 + 1]):  # the body's schema names the offending item
        r = client.post(f"/bundles/{b}/split", json={"positions": bad}, headers=AUTH)
        assert r.status_code == 422 and r.json()["detail"][0]["field"].startswith("positions."), r.json()
    r = client.post(f"/bundles/{b}/split", json={"algorithm": "flow_or_qps_equally_divide"}, headers=AUTH)
    assert r.status_code == 412  # Pulsar's answer to an algorithm outside the supported list
    assert r.json()["detail"][0] == {
        "field": "algorithm",
        "value": "flow_or_qps_equally_divide",
        "reason": "unsupported namespace bundle split algorithm",
    }
    r = client.post(f"/bundles/{b}/split", json={"algorithm": "range_equally_divide"}, headers=AUTH)
    assert r.status_code == 200 and len(svc.bundles) == 5
    assert svc.split_unloads[-1] is False  # split-bundle without -u leaves the children in place
    r = client.post(f"/bundles/{svc.bundles[0]}/split", json={"unload": True}, headers=AUTH)
    assert r.status_code == 200 and svc.split_unloads[-1] is True
    assert client.get("/decisions", params={"kind": "manual"}).json()["decisions"][0]["bundle"] == b
    assert client.get("/decisions", params={"kind": "nope"}).status_code == 422


def test_config_put(client: TestClient) -> None:
    r = client.put("/config", json={"loadBalancerSheddingIntervalMinutes": 3}, headers=AUTH)
    assert r.status_code == 200 and r.json()["values"]["loadBalancerSheddingIntervalMinutes"] == 3
    r = client.put("/config", json={"noSuchKey": 1}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "noSuchKey"


def test_dry_run_changes_nothing(client: TestClient, svc: FakeService) -> None:
    before = dict(svc.owners)
    r = client.post("/shedding/dry-run")
    assert r.status_code == 200 and r.json()["changed"] is False
    move = r.json()["moves"][0]
    assert (move["bundle"], move["source"], move["destination"]) == (svc.bundles[0], "b1", "b2")
    assert move["explanation"]["reason"] == "Overloaded" and move["explanation"]["numbers"]["usage"] == 0.93
    assert svc.owners == before


def test_mutation_on_a_follower_without_a_known_leader_is_503() -> None:
    client = TestClient(create_app(FakeService(leader=False), Settings()), base_url="http://localhost")
    r = client.post("/shedding/dry-run")
    assert r.status_code == 200
    r = client.post(f"/bundles/{FakeService().bundles[0]}/unload")
    assert r.status_code == 503 and r.json()["error"] == "NoLeader"


class _FrozenLeader:
    """A listening socket nobody serves: the kernel completes the handshake, no answer ever comes."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_forwarding_to_a_frozen_leader_gives_up_quickly_with_503() -> None:
    class Follower(FakeService):
        leader_url = ""

        def _require_leader(self) -> None:
            raise NotLeader(self.leader_url)

    svc = Follower(leader=False)
    client = TestClient(create_app(svc, Settings(api_token="s3cret")), base_url="http://127.0.0.1")
    with _FrozenLeader() as url:
        svc.leader_url = url
        started = time.monotonic()
        r = client.post(f"/bundles/{svc.bundles[0]}/unload", headers={"Authorization": "Bearer s3cret"})
        waited = time.monotonic() - started
    assert r.status_code == 503 and r.json()["error"] == "LeaderUnreachable", r.text
    assert r.headers["Retry-After"] == "2"
    # The bound in force, not the 10 s the forward used to wait.
    assert FORWARD_TIMEOUT.read is not None and waited < FORWARD_TIMEOUT.read + 2 < 10


def test_bundles_and_decisions_page_with_a_cursor_and_filters(client: TestClient, svc: FakeService) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        r = client.get("/bundles", params=params)
        assert r.status_code == 200
        seen += [row["bundle"] for row in r.json()]
        pages += 1
        cursor = r.headers.get("X-Next-Cursor")
        if cursor is None:
            assert "Link" not in r.headers
            break
        assert r.headers["Link"].endswith('rel="next"') and len(r.json()) == 3
    assert seen == sorted(svc.bundles) and pages == 2
    r = client.get("/bundles", params={"limit": 2, "broker": "b1"})
    assert [row["bundle"] for row in r.json()] == sorted(svc.bundles)[:2]
    r = client.get("/bundles", params={"limit": 2, "broker": "b1", "cursor": r.headers["X-Next-Cursor"]})
    assert [row["bundle"] for row in r.json()] == [
        sorted(svc.bundles)[2]
    ] and "X-Next-Cursor" not in r.headers
    for bad in ("nope", "ZGVjaXNpb246Mw"):  # garbage, and a decision cursor given to /bundles
        r = client.get("/bundles", params={"cursor": bad})
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "cursor", r.json()
    assert client.get("/bundles", params={"limit": 0}).status_code == 422

    svc.log = [
        {
            "id": i,
            "kind": "shedding",
            "bundle": svc.bundles[i % 4],
            "source": "b1",
            "destination": f"b{2 + i % 2}",
        }
        for i in range(1, 8)
    ][::-1]  # newest first, as the service answers
    first = client.get("/decisions", params={"limit": 2, "broker": "b3"}).json()
    assert [d["id"] for d in first["decisions"]] == [7, 5] and first["nextCursor"]
    rest = client.get("/decisions", params={"limit": 2, "broker": "b3", "cursor": first["nextCursor"]}).json()
    assert [d["id"] for d in rest["decisions"]] == [3, 1] and rest["nextCursor"] is None
    other = client.get("/decisions", params={"namespace": "other/ns"}).json()
    assert other["decisions"] == [] and other["nextCursor"] is None
    r = client.get("/decisions", params={"cursor": seen and "YnVuZGxlOng"})  # a bundle cursor
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "cursor"
