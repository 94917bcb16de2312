"""Pulsar mode keeps its promises, on a real ZooKeeper with a request-checking stand-in for Pulsar's
admin API (tests/integration/servers.py; the real-broker tier is too heavy for these checks):

* it creates only the nodes docs/pulsar-mode.md lists, all under /loadmgr, and nothing at all in a
  configuration store its identity may only read (and starts with such an identity);
* a read token's lookup never reaches Pulsar's lookup, which assigns;
* config nodes nested thousands of levels deep do not stop it;
* an admin's PUT /config replaces an unreadable /loadmgr/config;
* dynamic values keep their JSON types on every instance.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from balancer.bundles import NamespaceBundles
from balancer.models import LocalBrokerData
from service.api import create_app
from service.api.metrics import PrometheusMetrics
from service.errors import ExecutorError
from service.leader.service import LoadManagerService
from service.pulsar.admin import PulsarAdmin
from service.settings import Settings
from service.zookeeper import paths as P
from tests.integration.conftest import ROOT, fast_config, wait_for
from tests.integration.servers import PulsarAdminStandIn

pytestmark = pytest.mark.integration

ADMIN, READ, SUPER = "promises-admin-token", "promises-read-token", "pulsar-super-user-token"
A = {"Authorization": f"Bearer {ADMIN}"}
R = {"Authorization": f"Bearer {READ}"}
SIDECAR = ("loadmgr", "sidecar-digest-pw")
OPERATOR = ("operator", "operator-digest-pw")
DEEP = b"[" * 5000 + b"]" * 5000


def _settings(hosts: str, admin_url: str, instance: str = "lm-1", **kw: Any) -> Settings:
    return Settings(
        mode="pulsar",
        zk_hosts=hosts,
        zk_chroot="",
        zk_session_timeout_s=4.0,
        instance_id=instance,
        api_token=ADMIN,
        api_read_token=READ,
        history_enabled=False,
        pulsar_admin_url=admin_url,
        pulsar_admin_token=SUPER,
        pulsar_check_interval_s=600.0,  # only a watch can wake the settings check during a test
        **kw,
    )


@contextlib.contextmanager
def _serving(settings: Settings) -> Iterator[LoadManagerService]:
    # Long intervals: the jobs run once per term (the first reconcile), nothing more.
    config = fast_config(
        loadBalancerSheddingIntervalMinutes=10.0, loadBalancerResourceQuotaUpdateIntervalMinutes=10.0
    )
    svc = LoadManagerService(settings, config, seed=1)
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


def _leading(svc: LoadManagerService) -> None:
    wait_for(svc.is_leader, 20, what="leadership")
    wait_for(lambda: svc._synced, 30, what="the term's first full sync and reconcile")


def _client(svc: LoadManagerService) -> TestClient:
    return TestClient(
        create_app(svc, svc.settings, PrometheusMetrics().registry), base_url="http://127.0.0.1"
    )


def _snapshot(client: KazooClient, path: str = "/") -> dict[str, tuple[int, int]]:
    """Every node with its data and children zxids: any write anywhere below ``path`` changes this."""
    out: dict[str, tuple[int, int]] = {}
    for child in client.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        _, stat = client.get(full)
        out[full] = (stat.mzxid, stat.pzxid)
        out.update(_snapshot(client, full))
    return out


def documented_writes() -> tuple[set[str], str]:
    """The nodes docs/pulsar-mode.md says Pulsar mode creates in the metadata store (the momentary
    ``auth-probe-<n>`` excepted), and what it says about the configuration store."""
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"^\| (writes \([^)]*\)) \| (.*) \|$", (ROOT / "docs/pulsar-mode.md").read_text(), re.M
        )
    }
    nodes = {p for p in re.findall(r"`(/[^`]*)`", rows["writes (metadata store)"]) if "<" not in p}
    return nodes, rows["writes (configuration store)"]


def _owned_and_free_topics(layout: NamespaceBundles) -> tuple[str, str]:
    first, second = layout.bundle_names[:2]
    owned = free = None
    for i in range(1000):
        topic = f"persistent://{layout.namespace}/t{i}"
        b = layout.find_bundle(topic)
        owned = owned or (topic if b == first else None)
        free = free or (topic if b == second else None)
        if owned and free:
            return owned, free
    raise AssertionError("no topics found in both bundles")


@pytest.fixture
def read_only_config_store(zk_hosts: str, _zk_admin: KazooClient) -> Iterator[tuple[str, KazooClient]]:
    """A configuration store (a chroot) holding Pulsar's nodes, every one of them with the ACL an
    operator gives a sidecar: all permissions for the operator, READ only for loadmgr's identity."""
    acl = [make_digest_acl(*OPERATOR, all=True), make_digest_acl(*SIDECAR, read=True)]
    chroot = f"/cfg-{uuid.uuid4().hex}"
    _zk_admin.create(chroot, b"", acl=acl)
    operator = KazooClient(
        hosts=zk_hosts + chroot, auth_data=[("digest", ":".join(OPERATOR))], default_acl=acl, timeout=10
    )
    operator.start(timeout=10)
    ns = "public/in-config"
    policies = {"bundles": NamespaceBundles.initial(ns, 2).to_policies()}
    operator.create(P.join(P.TENANT_POLICIES, ns), json.dumps(policies).encode(), makepath=True)
    operator.create(P.join(P.CLUSTERS, "c1"), b'{"serviceUrl": "http://c1:8080"}', makepath=True)
    try:
        yield zk_hosts + chroot, operator
    finally:
        with contextlib.suppress(Exception):
            operator.delete("/", recursive=True)  # the chroot's children; the chroot itself below
        operator.stop()
        operator.close()
        with contextlib.suppress(Exception):
            _zk_admin.delete(chroot, recursive=True)


@pytest.mark.parametrize(
    "configuration_store", [False, True], ids=["metadata-store-only", "read-only-config-store"]
)
def test_pulsar_mode_creates_only_the_documented_nodes_and_nothing_in_a_read_only_configuration_store(
    configuration_store: bool, zk_chroot_hosts: str, zk_client: KazooClient, request: pytest.FixtureRequest
) -> None:
    operator: KazooClient | None = None
    extra: dict[str, Any] = {}
    if configuration_store:
        config_hosts, operator = request.getfixturevalue("read_only_config_store")
        extra["configuration_store"] = config_hosts
    documented, config_store_row = documented_writes()
    assert documented and all(p == P.LOADMGR or p.startswith(P.LOADMGR + "/") for p in documented)
    assert config_store_row.startswith("nothing")
    config_before = None if operator is None else _snapshot(operator)
    meta_before = _snapshot(zk_client)  # a fresh metadata store: empty
    settings = _settings(zk_chroot_hosts, "", zk_auth=":".join(SIDECAR), **extra)
    with PulsarAdminStandIn() as pulsar:
        settings = settings.model_copy(update={"pulsar_admin_url": pulsar.url})
        with _serving(settings) as svc:  # a READ-only identity on the configuration store starts
            _leading(svc)
            wait_for(lambda: svc._verdict is not None, 20, what="the brokers' settings checked once")
            client = _client(svc)
            r = client.put("/config", json={"loadBalancerBrokerThresholdShedderPercentage": 20}, headers=A)
            assert r.status_code == 200, r.text
            # Namespaces are Pulsar's in this mode: even the admin token changes none of them here.
            for method, path, kw in (
                ("POST", "/namespaces/public/fresh", {"json": {"bundles": 2}}),
                ("PUT", "/namespaces/public/fresh/policies", {"json": {"namespaceAntiAffinityGroup": "g"}}),
                ("DELETE", "/namespaces/public/fresh", {}),
            ):
                r = client.request(method, path, headers=A, **kw)
                assert r.status_code == 412 and "pulsar-admin" in r.text, (method, path, r.text)
            during = _snapshot(zk_client)
            early = set(during) - set(meta_before)
            assert early <= documented, f"created {sorted(early - documented)}, not in docs/pulsar-mode.md"
            # Pulsar's nodes appear only now (a broker registers): loadmgr sees them through the
            # watch it left on the absent /loadbalance/brokers, without having created anything.
            broker = KazooClient(hosts=zk_chroot_hosts, timeout=10)
            broker.start(timeout=10)
            try:
                report = LocalBrokerData(web_service_url=pulsar.url).to_json_dict()
                broker.create(
                    P.broker_path("b1:8080"), json.dumps(report).encode(), ephemeral=True, makepath=True
                )
                wait_for(
                    lambda: any(path.endswith("/configuration/runtime") for _, path, _ in pulsar.requests),
                    20,
                    what="the new broker's settings read, woken by the watch on /loadbalance/brokers",
                )
                wait_for(svc.pulsar_acting, 20, what="the verdict to clear with the broker's settings")
            finally:
                broker.stop()
                broker.close()
    after = _snapshot(zk_client)
    pulsars_own = {"/loadbalance", P.BROKERS}  # the broker above created these, not loadmgr
    created = (set(during) | (set(after) - pulsars_own)) - set(meta_before)
    assert created == documented, f"created {sorted(created)}, documented {sorted(documented)}"
    if operator is not None:
        assert _snapshot(operator) == config_before, "the configuration store was written"


def test_a_read_token_lookup_never_reaches_pulsars_lookup(
    zk_chroot_hosts: str, zk_client: KazooClient
) -> None:
    ns = "public/lookups"
    layout = NamespaceBundles.initial(ns, 2)
    zk_client.create(
        P.policies_path(ns), json.dumps({"bundles": layout.to_policies()}).encode(), makepath=True
    )
    owned_topic, free_topic = _owned_and_free_topics(layout)
    owner = KazooClient(hosts=zk_chroot_hosts, timeout=10)  # a Pulsar broker's session
    owner.start(timeout=10)
    try:
        data = {"nativeUrl": "pulsar://b1:6650", "httpUrl": "http://b1:8080", "disabled": False}
        owner.create(
            P.ownership_path(layout.bundle_names[0]), json.dumps(data).encode(), ephemeral=True, makepath=True
        )
        with (
            PulsarAdminStandIn(lookup_broker="b9:8080") as pulsar,
            _serving(_settings(zk_chroot_hosts, pulsar.url)) as svc,
        ):
            _leading(svc)
            client = _client(svc)
            before = _snapshot(zk_client)
            r = client.get(f"/lookup/{owned_topic}", headers=R)
            assert r.status_code == 200 and r.json()["broker"] == "b1:8080", r.text
            r = client.get(f"/lookup/{free_topic}", headers=R)
            assert r.status_code == 403 and r.json()["error"] == "AdminRequired", r.text
            assert pulsar.lookups() == [], "a read token's lookup reached Pulsar's lookup, which assigns"
            assert _snapshot(zk_client) == before
            # control: the admin's lookup is Pulsar's own, with the super-user token
            r = client.get(f"/lookup/{free_topic}", headers=A)
            assert r.status_code == 200 and r.json()["broker"] == "b9:8080", r.text
            ((method, path, auth),) = pulsar.lookups()
            assert method == "GET" and path.startswith(f"/lookup/v2/topic/persistent/{ns}/")
            assert auth == f"Bearer {SUPER}"
    finally:
        owner.stop()
        owner.close()


def test_config_nodes_nested_thousands_deep_do_not_stop_serve(
    zk_chroot_hosts: str, zk_client: KazooClient, caplog: pytest.LogCaptureFixture
) -> None:
    zk_client.create(P.LOADMGR_CONFIG, b'{"values": ' + DEEP + b"}", makepath=True)
    zk_client.create(P.PULSAR_DYNAMIC_CONFIG, DEEP, makepath=True)
    zk_client.create(P.join(P.TENANT_POLICIES, "public/deep"), DEEP, makepath=True)
    caplog.set_level(logging.WARNING)
    with PulsarAdminStandIn(answer=DEEP) as pulsar, _serving(_settings(zk_chroot_hosts, pulsar.url)) as svc:
        _leading(svc)  # the first full sync read the deep Policies node too
        assert svc.config == svc._base_config
        for path in (P.LOADMGR_CONFIG, P.PULSAR_DYNAMIC_CONFIG):
            lines = [r for r in caplog.records if path in r.getMessage()]
            assert len(lines) == 1, [r.getMessage() for r in lines]
            assert "nested deeper" in lines[0].getMessage()
        # a broker's answer nested as deep: a clear error, not a RecursionError
        with pytest.raises(ExecutorError, match="not JSON"):
            PulsarAdmin(pulsar.url).get_json("/admin/v2/clusters")
        # and a request body: refused before any route parses it
        r = _client(svc).put(
            "/config", content=b'{"a": ' + DEEP + b"}", headers={**A, "Content-Type": "application/json"}
        )
        assert r.status_code == 422 and "nested deeper" in r.text, r.text


def test_an_admin_put_replaces_an_unreadable_config_node(
    zk_chroot_hosts: str, zk_client: KazooClient
) -> None:
    zk_client.create(P.LOADMGR_CONFIG, b'{"values": {not json', makepath=True)
    with PulsarAdminStandIn() as pulsar, _serving(_settings(zk_chroot_hosts, pulsar.url)) as svc:
        _leading(svc)
        r = _client(svc).put("/config", json={"loadBalancerBrokerThresholdShedderPercentage": 20}, headers=A)
        assert r.status_code == 200, r.text
        doc = json.loads(zk_client.get(P.LOADMGR_CONFIG)[0])
        assert doc["values"] == {"loadBalancerBrokerThresholdShedderPercentage": 20}
        assert doc["updatedBy"].startswith("admin ")
        # written through the leader's fence: a write of a replaced leader would be refused
        fence = svc.election.fence()
        assert fence is not None and zk_client.exists(P.LEADER_EPOCH).version == fence.version


def test_list_values_keep_their_json_type_on_every_instance(
    zk_chroot_hosts: str, zk_client: KazooClient
) -> None:
    wanted = ["secnew/x1", "secnew/x2"]
    key = "loadBalancerSheddingExcludedNamespaces"
    with PulsarAdminStandIn() as pulsar, _serving(_settings(zk_chroot_hosts, pulsar.url)) as leader:
        _leading(leader)
        with _serving(_settings(zk_chroot_hosts, pulsar.url, instance="lm-2")) as follower:
            r = _client(leader).put("/config", json={key: wanted}, headers=A)
            assert r.status_code == 200 and r.json()["values"][key] == wanted, r.text
            stored = json.loads(zk_client.get(P.LOADMGR_CONFIG)[0])["values"][key]
            assert stored == wanted  # a JSON list, not the text of a Python list
            for svc in (leader, follower):
                wait_for(
                    lambda s=svc: getattr(s.config, key) == wanted, 20, what=f"{svc.instance_id} to apply"
                )
                assert _client(svc).get("/config", headers=R).json()["values"][key] == wanted
            # a number set as text is stored as the number it was validated to
            r = _client(leader).put(
                "/config", json={"loadBalancerBrokerThresholdShedderPercentage": "25"}, headers=A
            )
            assert r.status_code == 200, r.text
            values = json.loads(zk_client.get(P.LOADMGR_CONFIG)[0])["values"]
            assert values == {key: wanted, "loadBalancerBrokerThresholdShedderPercentage": 25}
