"""One factory builds every ZooKeeper client the project makes (``service.zookeeper.session.client``),
so every session gets the same TLS, credentials and ACL. A command that built a bare ``KazooClient``
ignored ``LOADMGR_ZK_TLS``/``_AUTH``/``_ACL`` (issue 33, items 2 and 3)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from kazoo.security import Permissions

from balancer.errors import InvalidInput
from service.settings import Settings
from service.zookeeper.session.client import new_client
from service.zookeeper.session.security import ZkSecurity

ROOT = Path(__file__).resolve().parents[2]
FACTORY = ROOT / "service" / "zookeeper" / "session" / "client.py"
PROJECT = ("service", "bench", "scripts", "deploy")
# Writes a population the leader did not write, by hand and on purpose without loadmgr's code (issue 49,
# item 13: "populated by raw ZooKeeper clients"): the one bare client the project means to build.
OUTSIDE_ON_PURPOSE = {ROOT / "bench" / "raw_populate.py"}


def _constructions(path: Path) -> list[str]:
    """Calls of KazooClient (by any name it was imported as) and aliases that could hide one."""
    tree = ast.parse(path.read_text(), str(path))
    names = {"KazooClient"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "kazoo.client":
            for a in node.names:
                if a.name == "KazooClient" and a.asname:
                    names.add(a.asname)
                    found.append(f"{path}:{node.lineno}: KazooClient imported as {a.asname}")
    for node in ast.walk(tree):
        # a subclass (the factory's own, which remembers a refused login) is a KazooClient too
        if isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Name) and b.id in names for b in node.bases
        ):
            names.add(node.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id in names) or (
                isinstance(f, ast.Attribute) and f.attr == "KazooClient"
            ):
                found.append(f"{path}:{node.lineno}: KazooClient(...)")
    return found


def _project_files() -> list[Path]:
    return [p for d in PROJECT if (ROOT / d).is_dir() for p in sorted((ROOT / d).rglob("*.py"))]


def test_no_zookeeper_client_is_built_outside_the_factory() -> None:
    found = [
        c for p in _project_files() if p != FACTORY and p not in OUTSIDE_ON_PURPOSE for c in _constructions(p)
    ]
    assert found == []
    assert all(_constructions(p) for p in OUTSIDE_ON_PURPOSE), "an exception that no longer builds one"
    assert _constructions(FACTORY), "the factory itself must be the one construction"


def test_the_check_sees_a_bare_construction(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import kazoo.client\nfrom kazoo.client import KazooClient as K\n"
        "K(hosts='x')\nkazoo.client.KazooClient(hosts='y')\n"
    )
    # the import alias, and both calls
    found = [c for c in _constructions(probe) if "KazooClient" in c]
    assert len(found) == 3, found


def test_the_factory_applies_tls_credentials_and_acl(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked until connect")
    settings = Settings(zk_auth="loadmgr:pw", zk_tls=True, zk_tls_ca=ca)
    client = new_client("127.0.0.1:2281/pulsar", ZkSecurity.from_settings(settings), 5.0)
    assert client.use_ssl is True
    assert client.ca == str(ca)
    assert ("digest", "loadmgr:pw") in client.auth_data
    # credentials without an explicit ACL: creator-all plus world-read, never world-writable
    acl = {(a.id.scheme, a.id.id, a.perms) for a in client.default_acl}
    assert ("auth", "", Permissions.ALL) in acl
    assert ("world", "anyone", Permissions.READ) in acl


def test_the_factory_refuses_a_malformed_connection_string() -> None:
    with pytest.raises(InvalidInput, match="zk_hosts"):
        new_client("not a host list:99999", ZkSecurity(), 5.0)


def test_namespaces_and_longterm_take_loadmgrs_security(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The two commands that used to build their own session now take LOADMGR_ZK_* as serve does."""
    import argparse

    from service.longterm.job import options_from_args
    from service.zookeeper.metadata.store import ZkStore

    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    monkeypatch.setenv("LOADMGR_ZK_TLS", "true")
    monkeypatch.setenv("LOADMGR_ZK_TLS_CA", str(ca))
    monkeypatch.setenv("LOADMGR_ZK_AUTH", "loadmgr:pw")
    args = argparse.Namespace(
        history="h", start="2024-01-01", end="2024-01-02", out=None, zk="127.0.0.1:2281", chroot=None,
        dry_run=False, master=None, mode="pulsar", p95=False,
    )  # fmt: skip
    options = options_from_args(args)
    assert options.security.tls and options.security.digest == "loadmgr:pw"
    store = ZkStore.from_settings(Settings())
    assert store.client.use_ssl and ("digest", "loadmgr:pw") in store.client.auth_data
