"""Every command's ZooKeeper session takes loadmgr's TLS, credentials and ACL (issue 33, items 2, 3):
``longterm``'s pre-check reaches a TLS-only ZooKeeper, ``namespaces`` writes as loadmgr's identity
and creates nodes that are not world-writable."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import Permissions

from service.commands.cli import main as cli_main
from service.longterm.job import options_from_args, zookeeper_problem
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from tests.integration.tls_files import TlsFiles

pytestmark = pytest.mark.integration

CREDS = "loadmgr:every-client"


def _longterm_args(zk: str) -> argparse.Namespace:
    return argparse.Namespace(
        history="unused", start="2024-01-01", end="2024-01-02", out=None, zk=zk, chroot=None,
        dry_run=False, master=None, mode="pulsar", p95=False,
    )  # fmt: skip


def test_longterm_precheck_speaks_tls_and_loadmgrs_identity(
    tls_zk: EmbeddedZooKeeper, tls: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the TLS settings the TLS port does not answer: the check itself can fail.
    monkeypatch.delenv("LOADMGR_ZK_TLS", raising=False)
    plain = zookeeper_problem(options_from_args(_longterm_args(tls_zk.secure_hosts)))
    assert plain is not None and "did not answer" in plain
    monkeypatch.setenv("LOADMGR_ZK_TLS", "true")
    monkeypatch.setenv("LOADMGR_ZK_TLS_CA", str(tls.ca))
    monkeypatch.setenv("LOADMGR_ZK_AUTH", CREDS)
    assert zookeeper_problem(options_from_args(_longterm_args(tls_zk.secure_hosts))) is None


def test_namespaces_uses_the_auth_file_serve_uses(
    zk_chroot_hosts: str,
    zk_client: KazooClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # loadmgr's own nodes exist already, created by `serve` with its identity (creator-all, world-read)
    secret = tmp_path / "zk-auth"
    secret.write_text(CREDS + "\n")
    monkeypatch.setenv("LOADMGR_ZK_AUTH_FILE", str(secret))
    serve_store = ZkStore.from_settings(Settings(zk_hosts=zk_chroot_hosts, zk_chroot=""))
    serve_store.start()
    serve_store.stop()

    assert cli_main(["namespaces", "--zk", zk_chroot_hosts, "create", "public/acl", "--bundles", "2"]) == 0
    out, err = capsys.readouterr()
    assert "created public/acl" in out and err == ""
    acl, _ = zk_client.get_acls(P.policies_path("public/acl"))
    world = [a for a in acl if a.id.scheme == "world"]
    assert world and all(not a.perms & Permissions.WRITE for a in world), acl
    assert any(a.id.scheme == "digest" and a.id.id.startswith("loadmgr:") for a in acl), acl
