"""ZooKeeper digest auth and ACLs on a real server: what loadmgr writes, anyone may read and nobody
else may change; wrong credentials fail at start with one line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NotEmptyError
from kazoo.security import Permissions

from service.broker.agent import BrokerAgent, SimulatedSource
from service.broker.workload import skewed_scenario
from service.errors import ZkAccessDenied
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from service.zookeeper.session.security import ZkSecurity
from tests.integration.conftest import ROOT, fast_config, wait_for
from tests.timing import scaled

pytestmark = pytest.mark.integration

CREDS = "loadmgr:s3cret-digest"
NS = "public/secure"


def _settings(hosts: str, **kw: object) -> Settings:
    return Settings(zk_hosts=hosts, zk_chroot="", zk_auth=CREDS, zk_session_timeout_s=4.0, **kw)  # type: ignore[arg-type]


def _security(creds: str) -> ZkSecurity:
    return ZkSecurity.from_settings(Settings(zk_auth=creds))


def _tree(client: KazooClient, path: str = "/") -> Iterator[str]:
    for child in client.get_children(path):
        full = P.join(path, child) if path != "/" else "/" + child
        yield full
        yield from _tree(client, full)


@pytest.fixture
def secured(zk_chroot_hosts: str) -> Iterator[tuple[LoadManagerService, BrokerAgent]]:
    """A leading service and one broker agent, both with digest credentials, with bundles owned."""
    settings = _settings(zk_chroot_hosts, instance_id="lm-1:1", http_port=1)
    svc = LoadManagerService(settings, fast_config(), seed=1)
    svc.start()
    store = ZkStore(zk_chroot_hosts, session_timeout_s=4.0, security=ZkSecurity.from_settings(settings))
    store.start()
    scenario = skewed_scenario(NS, 4, 1, msg_rate=100.0)
    agent = BrokerAgent(
        store,
        "b1:8080",
        svc.config,
        SimulatedSource(lambda: scenario),
        ownership_poll_s=0.3,
        report_interval_s=0.5,
    )
    try:
        wait_for(svc.is_leader, 20, what="leadership")
        svc.create_namespace(NS, 4)
        agent.start()
        wait_for(lambda: len(store.read_owners()) == 4, 30, what="all bundles owned")
        wait_for(lambda: len(store.read_bundle_data()) == 4, 30, what="bundle data written by the leader")
        yield svc, agent
    finally:
        agent.stop(release=False)
        store.stop()
        svc.stop()


def test_anonymous_reads_everything_but_changes_nothing(
    secured: tuple[LoadManagerService, BrokerAgent], zk_client: KazooClient
) -> None:
    nodes = sorted(_tree(zk_client))
    # every kind of node loadmgr writes is there, or the test would prove little
    for must in (P.LEADER, P.LEADER_EPOCH, P.broker_path("b1:8080"), P.ASSIGNMENTS, P.BUNDLE_DATA):
        assert must in nodes, must
    assert any(n.startswith(P.OWNERSHIP + "/" + NS + "/0x") for n in nodes)
    assert any(n.startswith(P.BUNDLE_DATA + "/" + NS + "/0x") for n in nodes)
    refused = {"set": 0, "create": 0, "delete": 0}
    for path in nodes:
        zk_client.get(path)  # reading is allowed everywhere
        acl, _ = zk_client.get_acls(path)
        assert not any(a.id.scheme == "world" and a.perms & Permissions.WRITE for a in acl), (path, acl)
        with pytest.raises(NoAuthError):
            zk_client.set(path, b"anonymous was here")
        refused["set"] += 1
        with pytest.raises(NoAuthError):
            zk_client.create(P.join(path, "intruder"), b"")
        refused["create"] += 1
        # Deleting a node needs DELETE on its parent; the top-level nodes' parent is the operator's
        # chroot (not loadmgr's), where they are only protected by their own children.
        expected = NotEmptyError if path.count("/") == 1 else NoAuthError
        with pytest.raises(expected):
            zk_client.delete(path)
        refused["delete"] += 1
    assert refused["set"] == len(nodes) > 20
    assert secured[0].is_leader()  # the leader node is still its own


def test_wrong_digest_fails_fast_with_one_line(zk_chroot_hosts: str) -> None:
    owner = ZkStore(zk_chroot_hosts, session_timeout_s=4.0, security=_security(CREDS))
    owner.start()  # loadmgr's nodes now exist with loadmgr's ACL
    try:
        intruder = ZkStore(
            zk_chroot_hosts,
            session_timeout_s=4.0,
            security=_security("loadmgr:wrong-password"),
        )
        started = time.monotonic()
        with pytest.raises(ZkAccessDenied) as e:
            intruder.start()
        # refused by the start-up probe, not after waiting out a session or a connect timeout
        assert time.monotonic() - started < intruder.session_timeout_s
        message = str(e.value)
        assert "\n" not in message and "'loadmgr'" in message and "wrong-password" not in message
        assert not intruder.connected
        # the same through the CLI: one line on stderr, exit code 2, no traceback
        env = {
            **os.environ,
            "LOADMGR_ZK_HOSTS": zk_chroot_hosts,
            "LOADMGR_ZK_AUTH": "loadmgr:wrong-password",
            "LOADMGR_INSECURE": "true",
            "LOADMGR_HTTP_PORT": "0",
            "LOADMGR_HISTORY_ENABLED": "false",
        }
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "service", "serve"], cwd=ROOT, env=env, capture_output=True, timeout=60
        )
        took = time.monotonic() - started
        errors = [line for line in proc.stderr.decode().splitlines() if line.startswith("loadmgr:")]
        assert proc.returncode == 2, proc.stderr.decode()
        assert len(errors) == 1 and "refused writes" in errors[0], proc.stderr.decode()
        assert "Traceback" not in proc.stderr.decode()
        print(f"serve with a wrong digest exited in {took:.2f}s")
    finally:
        owner.stop()


def test_explicit_acl_list_is_applied(zk_chroot_hosts: str, zk_client: KazooClient) -> None:
    settings = _settings(zk_chroot_hosts, zk_acl="auth::cdrwa,world:anyone:r,digest:pulsar:HASHED=:rw")
    store = ZkStore(zk_chroot_hosts, session_timeout_s=4.0, security=ZkSecurity.from_settings(settings))
    store.start()
    try:
        store.put_json(P.join(P.LOADMGR, "x"), {"a": 1})
        acl, _ = zk_client.get_acls(P.join(P.LOADMGR, "x"))
        schemes = {(a.id.scheme, a.id.id.split(":")[0], a.perms) for a in acl}
        assert ("digest", "pulsar", Permissions.READ | Permissions.WRITE) in schemes
        assert ("world", "anyone", Permissions.READ) in schemes
        assert ("digest", "loadmgr", Permissions.ALL) in schemes  # auth:: became loadmgr's digest id
    finally:
        store.stop()


@pytest.fixture
def sasl_zk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedZooKeeper]:
    """A private ZooKeeper with SASL: its JAAS ``Server`` section knows one DIGEST-MD5 user."""
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(
        "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        '  user_loadmgr="sasl-secret";\n};\n'
    )
    # The JVM reads JAVA_TOOL_OPTIONS by itself, so the launcher needs no SASL option of its own.
    monkeypatch.setenv(
        "JAVA_TOOL_OPTIONS",
        f"-Djava.security.auth.login.config={jaas} "
        "-Dzookeeper.authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
    )
    with EmbeddedZooKeeper() as zk:
        monkeypatch.delenv("JAVA_TOOL_OPTIONS")
        yield zk


def test_sasl_identity_owns_the_nodes_and_a_wrong_password_fails_fast(sasl_zk: EmbeddedZooKeeper) -> None:
    settings = Settings(zk_auth="loadmgr:sasl-secret", zk_auth_scheme="sasl")
    store = ZkStore(sasl_zk.hosts, session_timeout_s=4.0, security=ZkSecurity.from_settings(settings))
    store.start()
    anonymous = KazooClient(sasl_zk.hosts)
    anonymous.start(timeout=10)
    try:
        store.put_json(P.join(P.LOADMGR, "x"), {"a": 1})
        acl, _ = anonymous.get_acls(P.join(P.LOADMGR, "x"))
        assert {(a.id.scheme, a.id.id, a.perms) for a in acl} == {
            ("sasl", "loadmgr", Permissions.ALL),
            ("world", "anyone", Permissions.READ),
        }
        with pytest.raises(NoAuthError):
            anonymous.set(P.join(P.LOADMGR, "x"), b"{}")
        wrong = Settings(zk_auth="loadmgr:wrong", zk_auth_scheme="sasl")
        # The SASL exchange must finish within the session timeout: a budget, stretched by the load
        # (with stress-ng --cpu 4 beside the suite, 4 s ran out before the refusal arrived).
        intruder = ZkStore(
            sasl_zk.hosts, session_timeout_s=scaled(4.0), security=ZkSecurity.from_settings(wrong)
        )
        started = time.monotonic()
        with pytest.raises(
            ZkAccessDenied, match="refused authentication of SASL DIGEST-MD5 user 'loadmgr'"
        ) as e:
            intruder.start()
        assert time.monotonic() - started < intruder.session_timeout_s and "\n" not in str(e.value)
    finally:
        anonymous.stop()
        store.stop()
