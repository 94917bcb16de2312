"""TLS end to end: ZooKeeper's secureClientPort (a generated test CA) and loadmgr over HTTPS.

``loadmgr serve`` runs as a real process, talking to ZooKeeper only over TLS with digest
credentials, serving HTTPS; an in-process follower forwards to it, verifying its certificate.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.commands.cli import main as cli_main
from service.errors import StoreUnavailable
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from service.zookeeper.server.process import free_port
from service.zookeeper.session.security import ZkSecurity
from tests.integration.conftest import ROOT, fast_config, wait_for
from tests.integration.tls_files import TlsFiles, make_ca

pytestmark = pytest.mark.integration

TOKEN = "tls-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CREDS = "loadmgr:tls-digest"


@pytest.fixture
def https_leader(tls: TlsFiles, tls_zk: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[str]:
    """``loadmgr serve`` over HTTPS, connected to ZooKeeper's TLS port only; yields its URL."""
    port = free_port()
    (tmp_path / "token").write_text(TOKEN + "\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LOADMGR_ZK_HOSTS": tls_zk.secure_hosts,
        "LOADMGR_ZK_TLS": "true",
        "LOADMGR_ZK_TLS_CA": str(tls.ca),
        "LOADMGR_ZK_AUTH": CREDS,
        "LOADMGR_HTTP_PORT": str(port),
        "LOADMGR_INSTANCE_ID": "lm-tls-1",
        "LOADMGR_API_TOKEN_FILE": str(tmp_path / "token"),
        "LOADMGR_HISTORY_ENABLED": "false",
        "LOADMGR_ZK_SESSION_TIMEOUT_S": "4",
    }
    env.pop("LOADMGR_API_TOKEN", None)
    cmd = [sys.executable, "-m", "service", "serve", "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: httpx.get(f"{url}/leader", headers=AUTH, verify=str(tls.ca), timeout=2).json()[
                "isLeader"
            ],
            40,
            what=f"the HTTPS leader (log: {tmp_path / 'serve.log'})",
        )
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        log.close()
        assert code == 0, (tmp_path / "serve.log").read_text()


def test_zookeeper_over_tls_and_https_end_to_end(
    https_leader: str, tls: TlsFiles, tls_zk: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    # HTTPS with the test CA works; the leader runs on a ZooKeeper session that is TLS-only
    r = httpx.get(f"{https_leader}/leader", headers=AUTH, verify=str(tls.ca), timeout=5)
    assert r.status_code == 200 and r.json()["leader"]["serviceUrl"] == https_leader
    # plain HTTP to the HTTPS port fails; so does HTTPS that does not trust the CA
    with pytest.raises(httpx.HTTPError):
        httpx.get(https_leader.replace("https://", "http://") + "/healthz", timeout=5)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{https_leader}/healthz", timeout=5)
    # the CLI client: token from a file, the test CA with --cacert; without the CA it refuses
    common = ["--url", https_leader, "--token-file", str(tmp_path / "token")]
    assert cli_main(["status", *common, "--cacert", str(tls.ca), "--json"]) == 0
    assert cli_main(["status", *common]) == 1

    # a follower, also on ZooKeeper over TLS, forwards an operator's unload to the leader over
    # verified HTTPS (the leader answers 404 for the made-up bundle: it did get the request)
    settings = Settings(
        zk_hosts=tls_zk.secure_hosts,
        zk_tls=True,
        zk_tls_ca=tls.ca,
        zk_auth=CREDS,
        zk_session_timeout_s=4.0,
        instance_id="lm-tls-2",
        http_port=free_port(),
        api_token=TOKEN,
        http_tls_ca=tls.ca,
        history_enabled=False,
    )
    follower = LoadManagerService(settings, fast_config(), seed=1)
    follower.start()
    try:
        assert not follower.is_leader()
        client = TestClient(create_app(follower, settings), base_url="http://127.0.0.1")
        bundle = "public/default/0x00000000_0x40000000"
        r = client.post(f"/bundles/{bundle}/unload", headers=AUTH)
        assert r.headers.get("x-loadmgr-served-by") == https_leader, r.text
        assert r.status_code == 404 and r.json()["error"] == "UnknownBundle"
        # the same follower without the CA refuses to send the token to an unverifiable leader
        untrusting = TestClient(
            create_app(follower, settings.model_copy(update={"http_tls_ca": None})),
            base_url="http://127.0.0.1",
        )
        r = untrusting.post(f"/bundles/{bundle}/unload", headers=AUTH)
        assert r.status_code == 503 and r.json()["error"] == "LeaderUnreachable"
        assert "CERTIFICATE_VERIFY_FAILED" in r.json()["detail"]["reason"]
    finally:
        follower.stop()


def test_plain_or_untrusting_clients_cannot_use_the_tls_port(
    tls_zk: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    plain = ZkStore(tls_zk.secure_hosts, session_timeout_s=4.0)
    with pytest.raises(StoreUnavailable, match="plain"):
        plain.start(timeout_s=3)
    other_ca = make_ca(tmp_path / "other", name="some other CA")
    untrusting = ZkStore(
        tls_zk.secure_hosts, session_timeout_s=4.0, security=ZkSecurity(tls=True, ca=other_ca.ca)
    )
    with pytest.raises(StoreUnavailable, match="TLS"):
        untrusting.start(timeout_s=3)
    assert not plain.connected and not untrusting.connected
