"""Roles, request guards, serve's exposure rules, leader identity and ACL parsing (no I/O beyond files)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from balancer.errors import ConfigError
from service.api import create_app
from service.api.metrics import PrometheusMetrics
from service.commands.serve import check_exposure, settings_from_args
from service.errors import AdminRequired
from service.leader.identity import EPOCH_KEY, SIGNATURE_KEY, LeaderIdentity
from service.settings import Settings
from service.zookeeper.session.security import ZkSecurity, parse_acl
from tests.unit.test_api import FakeService

ADMIN, READ = "admin-t0ken-0123456789", "read-t0ken-0123456789"
A = {"Authorization": f"Bearer {ADMIN}"}
R = {"Authorization": f"Bearer {READ}"}
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


class OwnedOnlyService(FakeService):
    """Lookups of an unowned bundle assign (a write) unless the caller may not."""

    def __init__(self) -> None:
        super().__init__()
        self.assigned: list[str] = []

    def lookup(self, topic: str, assign: bool = True, principal: str | None = None) -> str:
        if not assign:
            raise AdminRequired("assigning needs admin")
        self.assigned.append(topic)
        return "b1"


@pytest.fixture
def svc() -> OwnedOnlyService:
    return OwnedOnlyService()


def _client(svc: Any, **kw: Any) -> TestClient:
    settings = Settings(api_token=ADMIN, api_read_token=READ, **kw)
    return TestClient(
        create_app(svc, settings, PrometheusMetrics().registry), base_url="http://127.0.0.1:8080"
    )


@pytest.fixture
def client(svc: OwnedOnlyService) -> Iterator[TestClient]:
    yield _client(svc)


def _concrete(path: str, svc: FakeService) -> str:
    return (
        path.replace("{bundle}", svc.bundles[0])
        .replace("{broker}", "b1")
        .replace("{topic}", "persistent://public/default/t")
        .replace("{tenant}", "public")
        .replace("{namespace}", "default")
    )


def _routes() -> list[tuple[str, str]]:
    """Every documented (method, path): the OpenAPI schema is what operators and clients see."""
    paths = create_app(FakeService(), Settings()).openapi()["paths"]
    return [(m.upper(), p) for p, ops in paths.items() for m in ops]


def test_reads_need_a_token_unless_opened(client: TestClient, svc: OwnedOnlyService) -> None:
    assert client.get("/brokers").status_code == 401
    assert client.get("/brokers", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/brokers", headers=R).status_code == 200
    assert client.get("/brokers", headers=A).status_code == 200
    assert client.get("/metrics").status_code == 200  # open by default, like Pulsar's
    closed = _client(svc, api_metrics_open=False)
    assert closed.get("/metrics").status_code == 401 and closed.get("/metrics", headers=R).status_code == 200
    assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200
    opened = _client(svc, api_reads_open=True)
    assert opened.get("/brokers").status_code == 200
    assert opened.post(f"/bundles/{svc.bundles[0]}/unload").status_code == 401


def test_every_mutating_route_refuses_read_and_missing_tokens(
    client: TestClient, svc: OwnedOnlyService
) -> None:
    mutating = [(m, p) for m, p in _routes() if m in UNSAFE and p != "/shedding/dry-run"]
    assert {p for _, p in mutating} == {
        "/bundles/{bundle}/unload",
        "/bundles/{bundle}/split",
        "/config",
        "/namespaces/{tenant}/{namespace}",
        "/namespaces/{tenant}/{namespace}/policies",
        "/brokers/{broker}/cordon",
        "/brokers/{broker}/uncordon",
        "/brokers/{broker}/drain",
        "/brokers/{broker}/drain/stop",
    }
    before = (dict(svc.owners), list(svc.bundles), svc.config)
    for method, path in mutating:
        url = _concrete(path, svc)
        body = {"loadBalancerSheddingIntervalMinutes": 2} if path == "/config" else None
        missing = client.request(method, url, json=body)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer", (method, path)
        read = client.request(method, url, json=body, headers=R)
        assert read.status_code == 403 and "admin" in read.json()["detail"]["reason"], (method, path)
    assert (dict(svc.owners), list(svc.bundles), svc.config) == before and svc.log == []
    # the same routes do work with the admin token, so the refusals above were about the role
    assert client.post(f"/bundles/{svc.bundles[0]}/unload", headers=A).status_code == 200


def test_an_assigning_lookup_needs_admin(client: TestClient, svc: OwnedOnlyService) -> None:
    r = client.get("/lookup/persistent://public/default/t", headers=R)
    assert r.status_code == 403 and r.json()["error"] == "AdminRequired" and svc.assigned == []
    assert client.get("/lookup/persistent://public/default/t", headers=A).status_code == 200
    assert svc.assigned == ["persistent://public/default/t"]


def test_the_decision_names_the_principal_not_the_token(client: TestClient, svc: OwnedOnlyService) -> None:
    r = client.post(f"/bundles/{svc.bundles[0]}/unload", headers=A)
    assert r.status_code == 200
    who = svc.log[-1]["principal"]
    assert who.startswith("admin sha256:") and ADMIN not in who


def test_tokens_from_files(tmp_path: Path, svc: OwnedOnlyService) -> None:
    (tmp_path / "admin").write_text(ADMIN + "\n")
    settings = Settings(api_token_file=tmp_path / "admin")
    client = TestClient(create_app(svc, settings), base_url="http://localhost")
    assert (
        client.put("/config", json={"loadBalancerSheddingIntervalMinutes": 2}, headers=A).status_code == 200
    )
    with pytest.raises(ConfigError, match="api_token_file"):
        Settings(api_token_file=tmp_path / "missing").admin_token()


def test_cross_origin_mutations_and_foreign_hosts_are_refused(
    client: TestClient, svc: OwnedOnlyService
) -> None:
    url = f"/bundles/{svc.bundles[0]}/unload"
    r = client.post(url, headers={**A, "Origin": "https://evil.example"})
    assert r.status_code == 403 and r.json()["error"] == "OriginNotAllowed" and svc.log == []
    assert client.post(url, headers={**A, "Origin": "http://127.0.0.1:8080"}).status_code == 200
    assert client.get("/brokers", headers={**R, "Origin": "https://evil.example"}).status_code == 200
    r = client.get("/brokers", headers={**R, "Host": "rebound.evil.example"})
    assert r.status_code == 421 and r.json()["error"] == "HostNotAllowed"
    allowed = _client(svc, allowed_origins="https://console.example")
    assert allowed.post(url, headers={**A, "Origin": "https://console.example"}).status_code == 200


def test_oversized_bodies_get_413_declared_or_chunked(svc: OwnedOnlyService) -> None:
    client = _client(svc, max_request_bytes=1024)
    big = {"loadBalancerSheddingIntervalMinutes": 2, "pad": "x" * 3000}
    r = client.put("/config", json=big, headers=A)
    assert r.status_code == 413 and r.json()["error"] == "RequestTooLarge"

    def chunks() -> Iterator[bytes]:
        yield b'{"loadBalancerSheddingIntervalMinutes": 2, "pad": "'
        for _ in range(40):
            yield b"x" * 100
        yield b'"}'

    r = client.put("/config", content=chunks(), headers={**A, "Content-Type": "application/json"})
    assert r.status_code == 413
    assert (
        client.put("/config", json={"loadBalancerSheddingIntervalMinutes": 2}, headers=A).status_code == 200
    )


def _args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**kw)


def test_serve_refuses_open_non_loopback_and_argv_tokens(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--insecure"):
        check_exposure(settings_from_args(_args(host="0.0.0.0")))
    assert "WARNING" in (check_exposure(settings_from_args(_args(host="0.0.0.0", insecure=True))) or "")
    assert "WARNING" in (check_exposure(settings_from_args(_args(host="127.0.0.1"))) or "")
    (tmp_path / "t").write_text(ADMIN)
    assert check_exposure(settings_from_args(_args(host="0.0.0.0", token_file=str(tmp_path / "t")))) is None
    with pytest.raises(ConfigError, match="ps"):
        settings_from_args(_args(token="visible-in-ps"))
    (tmp_path / "r").write_text(ADMIN)
    with pytest.raises(ConfigError, match="differ"):
        check_exposure(
            settings_from_args(_args(token_file=str(tmp_path / "t"), read_token_file=str(tmp_path / "r")))
        )
    (tmp_path / "short").write_text("abc")
    assert "characters" in (
        check_exposure(settings_from_args(_args(token_file=str(tmp_path / "short")))) or ""
    )


def test_leader_identity_signature_and_allow_list() -> None:
    ident = LeaderIdentity.of(ADMIN)
    doc = ident.document("lm-1", "https://lm-1:8443", session_id=0x1234, epoch=7)
    assert doc[EPOCH_KEY] == 7
    assert ident.verify(doc, 0x1234, 7) == ("https://lm-1:8443", "")
    forged = {**doc, "serviceUrl": "http://evil:9"}
    assert ident.verify(forged, 0x1234, 7)[0] is None and "signature" in ident.verify(forged, 0x1234, 7)[1]
    assert LeaderIdentity.of("other-token").verify(doc, 0x1234, 7)[0] is None  # another cluster's key
    unsigned = {"brokerId": "lm-1", "serviceUrl": "https://lm-1:8443"}
    assert ident.verify(unsigned, 0x1234, 7)[0] is None and SIGNATURE_KEY not in unsigned
    listed = LeaderIdentity.of(None, "https://lm-1:8443/, https://lm-2:8443")
    assert listed.verify(unsigned)[0] == "https://lm-1:8443"
    assert listed.verify({"brokerId": "x", "serviceUrl": "https://lm-3:8443"})[0] is None
    assert LeaderIdentity.of(None).verify({"brokerId": "x", "serviceUrl": "file:///etc/passwd"})[0] is None
    assert LeaderIdentity.of(None).verify({"brokerId": "x", "serviceUrl": "http://a:1"})[0] == "http://a:1"


def test_a_replayed_leader_node_does_not_verify() -> None:
    """Issue 33 item 1: the recorded bytes of a dead leader's node, recreated by another session, or
    shown in a later epoch, must not verify (the signature used to cover the id and URL only)."""
    ident = LeaderIdentity.of(ADMIN)
    recorded = ident.document("lm-a", "http://127.0.0.1:8080", session_id=0xA, epoch=3)
    assert ident.verify(recorded, 0xA, 3)[0] == "http://127.0.0.1:8080"
    url, why = ident.verify(recorded, 0xE, 3)  # recreated as the attacker's own ephemeral node
    assert url is None and "replayed" in why
    url, why = ident.verify(recorded, 0xA, 4)  # a newer leader has won since
    assert url is None and "epoch" in why
    for missing in ("loadmgrEpoch", SIGNATURE_KEY):
        partial = {k: v for k, v in recorded.items() if k != missing}
        assert ident.verify(partial, 0xA, 3)[0] is None
    assert ident.verify(recorded, None, 3)[0] is None  # no owner session known: not trusted
    assert ident.verify({**recorded, "loadmgrEpoch": "3"}, 0xA, 3)[0] is None


def test_acl_parsing_names_the_field() -> None:
    acl = parse_acl("auth::cdrwa, world:anyone:r, digest:pulsar:abc/def=:rw")
    assert [(a.id.scheme, a.id.id, a.perms) for a in acl] == [
        ("auth", "", 31),
        ("world", "anyone", 1),
        ("digest", "pulsar:abc/def=", 3),
    ]
    for bad in ("world:anyone", "world:anyone:rx", ""):
        with pytest.raises(ConfigError, match="zk_acl"):
            parse_acl(bad)
    with pytest.raises(ConfigError, match="zk_auth"):
        ZkSecurity.from_settings(Settings(zk_auth="no-colon"))
    with pytest.raises(ConfigError, match="auth"):
        ZkSecurity.from_settings(Settings(zk_acl="auth::cdrwa"))
    assert ZkSecurity.from_settings(Settings()).open
    assert not ZkSecurity.from_settings(Settings(zk_auth="u:p")).open
