"""``loadmgr namespaces`` on a real ZooKeeper writes Pulsar's own nodes, which the leader's policy
reader then finds: the namespace admin and the live placement agree on one set of nodes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from balancer.errors import InvalidInput
from service.commands.cli import main
from service.zookeeper import paths as P
from service.zookeeper.metadata.namespaces import NamespaceAdmin
from service.zookeeper.metadata.policies import read_placement_policies
from service.zookeeper.metadata.store import ZkStore

pytestmark = pytest.mark.integration


@pytest.fixture
def store(zk_chroot_hosts: str) -> Iterator[ZkStore]:
    s = ZkStore(zk_chroot_hosts, session_timeout_s=10)
    s.start()
    yield s
    s.stop()


def run(hosts: str, *argv: str) -> int:
    return main(["namespaces", "--zk", hosts, "--chroot", "", *argv])


def test_create_policies_list_delete(
    zk_chroot_hosts: str, store: ZkStore, capsys: pytest.CaptureFixture[str]
) -> None:
    h = zk_chroot_hosts
    assert (
        run(h, "create", "pay/eu", "--bundles", "8", "--cluster", "c1", "--anti-affinity-group", "pay") == 0
    )
    assert run(h, "create", "pay/us", "--bundles", "2", "--cluster", "c1") == 0
    # exists: one clear error on stderr, no traceback, exit 2 (the caller's to fix, as argparse's)
    assert run(h, "create", "pay/us", "--cluster", "c1") == 2
    assert "already exists" in capsys.readouterr().err
    assert run(h, "create", "no-tenant", "--cluster", "c1") == 2
    assert "namespace='no-tenant'" in capsys.readouterr().err

    # Pulsar's shapes: TenantInfo, Policies and LocalPolicies with the layout and the group.
    assert store.get_json("/admin/policies/pay").value == {"adminRoles": [], "allowedClusters": ["c1"]}
    assert store.get_json("/admin/policies/pay/eu").value["bundles"]["numBundles"] == 8
    local = store.get_json(P.policies_path("pay/eu")).value
    assert local["bundles"]["numBundles"] == 8 and local["namespaceAntiAffinityGroup"] == "pay"

    assert run(h, "policies", "pay/us", "--anti-affinity-group", "pay") == 0
    assert (
        run(h, "policies", "pay/us", "--isolation-policy", "iso", "--primary", "b-[12]", "--cluster", "c1")
        == 0
    )
    assert run(h, "policies", "pay/us", "--isolation-policy", "bad", "--primary", "(", "--cluster", "c1") == 2
    assert "bad regex" in capsys.readouterr().err
    store.put_json(P.join(P.CLUSTERS, "c1"), {"serviceUrl": "http://b-1:8080"})
    found = read_placement_policies(store, "", store.namespaces())
    assert found.cluster == "c1"
    assert found.anti_affinity_groups == {"pay/eu": "pay", "pay/us": "pay"}
    [iso] = found.isolation_policies
    assert iso.name == "iso" and iso.applies_to("pay/us") and not iso.applies_to("pay/eu")
    assert iso.is_primary("b-2") and not iso.is_primary("b-3")

    capsys.readouterr()
    assert run(h, "list", "-o", "json") == 0
    rows = {r["namespace"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["pay/eu"]["bundles"] == 8 and rows["pay/eu"]["namespaceAntiAffinityGroup"] == "pay"
    assert rows["pay/us"]["bundles"] == 2
    assert run(h, "list") == 0
    table = capsys.readouterr().out
    assert "pay/eu" in table and "pay/us" in table and "antiAffinityGroup" in table

    assert run(h, "policies", "pay/us", "--no-anti-affinity-group") == 0
    assert "namespaceAntiAffinityGroup" not in store.get_json(P.policies_path("pay/us")).value
    assert run(h, "delete", "pay/us") == 0
    assert store.namespaces() == ["pay/eu"] and store.get_json("/admin/policies/pay/us") is None
    assert run(h, "delete", "pay/us") == 2
    assert "namespace pay/us does not exist" in capsys.readouterr().err


def test_rest_namespaces_write_the_same_nodes(store: ZkStore) -> None:
    from types import SimpleNamespace

    from fastapi.testclient import TestClient

    from balancer.config import LoadBalancerConfig
    from service.api.app import create_app
    from service.settings import Settings

    settings = Settings(cluster="c1", api_token="t")
    service = SimpleNamespace(
        namespaces=lambda: NamespaceAdmin(store), settings=settings, config=LoadBalancerConfig()
    )
    auth = {"Authorization": "Bearer t"}
    with TestClient(create_app(service, settings), base_url="http://127.0.0.1") as api:
        assert api.post("/namespaces/pay/eu", json={}).status_code == 401
        r = api.post("/namespaces/pay/eu", json={"namespaceAntiAffinityGroup": "pay"}, headers=auth)
        assert r.status_code == 201 and r.json() == {
            "namespace": "pay/eu",
            "bundles": 4,  # defaultNumberOfNamespaceBundles
            "namespaceAntiAffinityGroup": "pay",
        }
        r = api.post("/namespaces/pay/eu", json={}, headers=auth)
        assert r.status_code == 409, r.text  # exists: Pulsar's admin answers 409 Conflict
        assert r.json()["error"] == "AlreadyExists"
        r = api.post("/namespaces/pay/eu", json={"bundles": 0}, headers=auth)
        assert r.status_code == 422
        # A cluster name becomes a ZooKeeper path segment: refused with the field named, never a 5xx
        # (schemathesis found '}\u00acb...' answered 503 BadArgumentsError from ZooKeeper).
        bad = {
            "isolationPolicy": {"cluster": "}\u00acb\u00d0", "name": "\u00ff\u00f0", "primary": ["x\ud812"]}
        }
        # Sent as schemathesis sends it: lone surrogates as \u escapes (they cannot be UTF-8).
        raw = json.dumps(bad).encode()
        headers = {**auth, "Content-Type": "application/json"}
        r = api.put("/namespaces/pay/eu/policies", content=raw, headers=headers)
        assert r.status_code == 422, r.text
        assert "cluster" in r.text
        for cluster in ("a/b", "\u00e9t\u00e9", "..x}"):
            with pytest.raises(InvalidInput, match="cluster"):
                NamespaceAdmin(store).isolate(cluster, "iso", "pay/eu", ["b-1"], [], 1)
        bad = {"isolationPolicy": {"name": "iso", "primary": ["b-1"], "minLimit": 2**31}}
        assert api.put("/namespaces/pay/eu/policies", json=bad, headers=auth).status_code == 422
        body = {"isolationPolicy": {"name": "iso", "primary": ["b-1"], "minLimit": 1}}
        r = api.put("/namespaces/pay/eu/policies", json=body, headers=auth)
        assert r.status_code == 200
        policies = store.get_json(P.isolation_policies_path("c1")).value
        assert policies["iso"]["primary"] == ["b-1"] and policies["iso"]["namespaces"] == ["pay/eu"]
        r = api.put("/namespaces/pay/eu/policies", json={"namespaceAntiAffinityGroup": ""}, headers=auth)
        assert r.json()["namespaceAntiAffinityGroup"] is None
        assert api.get("/namespaces", headers=auth).json() == [
            {"namespace": "pay/eu", "bundles": 4, "namespaceAntiAffinityGroup": None}
        ]
        assert api.delete("/namespaces/pay/eu", headers=auth).status_code == 204
        r = api.delete("/namespaces/pay/eu", headers=auth)
        assert r.status_code == 404
        assert r.json()["error"] == "UnknownNamespace" and r.json()["detail"]["namespace"] == "pay/eu"
        assert api.get("/namespaces", headers=auth).json() == []
