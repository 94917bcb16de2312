"""A ``loadmgr serve`` refused for the wrong mode (service/zookeeper/metadata/cluster_kind.py) leaves
nothing behind: no history directory created, no recorded config (``_loadmgr.json``) written or
overwritten. The command runs in-process against a real ZooKeeper."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.commands.cli import main
from service.longterm.history_meta import META_NAME
from service.zookeeper import paths as P
from service.zookeeper.server.process import free_port
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration

EARLIER = b'{"config": {}, "cluster": "earlier", "written_ms": 1}'


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _serve(cluster: Cluster, history: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> int:
    monkeypatch.setenv("LOADMGR_HISTORY_URI", str(history))
    for key in ("LOADMGR_MODE", "LOADMGR_HISTORY_ENABLED", "LOADMGR_ZK_CHROOT", "LOADMGR_CLUSTER"):
        monkeypatch.delenv(key, raising=False)
    return main(["serve", "--zk", cluster.hosts, "--host", "127.0.0.1", "--port", str(free_port()), *extra])


def test_zookeeper_native_serve_refused_on_a_pulsar_clusters_zookeeper_writes_no_history(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a Pulsar cluster leaves in ZooKeeper: BookKeeper's ledgers and its cluster data.
    cluster.admin.client.create("/ledgers", b"", makepath=True)
    cluster.admin.client.create(
        f"{P.CLUSTERS}/pulsar-a", b'{"serviceUrl":"http://127.0.0.1:8080"}', makepath=True
    )
    fresh = tmp_path / "fresh"
    assert _serve(cluster, fresh, monkeypatch) == 2
    err = capsys.readouterr().err
    assert "--mode pulsar" in err, err
    assert not fresh.exists(), _tree(fresh)

    # A history another run recorded stays as it was, its recorded config included.
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / META_NAME).write_bytes(EARLIER)
    before = _tree(kept)
    assert _serve(cluster, kept, monkeypatch) == 2
    assert "--mode pulsar" in capsys.readouterr().err
    assert _tree(kept) == before

    # control: asked for explicitly, the mode is allowed (with a warning) and the start records its
    # config, so the checks above could fail. The server itself is not run: it would serve forever.
    import signal
    import sys

    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # leave pytest's Ctrl-C handler alone
    switch = sys.getswitchinterval()
    try:
        assert _serve(cluster, kept, monkeypatch, "--mode", "zookeeper") == 0
    finally:
        sys.setswitchinterval(switch)
    assert "WARNING" in capsys.readouterr().err
    assert _tree(kept) != before and b"ThresholdShedder" in (kept / META_NAME).read_bytes()


def test_pulsar_mode_serve_refused_beside_loadmgrs_agents_writes_no_history(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a ZooKeeper-native leader leaves: its assignments.
    cluster.admin.client.create(f"{P.ASSIGNMENTS}/public/default/0x00000000_0xffffffff", b"{}", makepath=True)
    history = tmp_path / "history"
    rc = _serve(
        cluster,
        history,
        monkeypatch,
        "--mode",
        "pulsar",
        "--cluster",
        "pulsar-a",
        "--pulsar-admin-url",
        "http://127.0.0.1:9",
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "--mode zookeeper" in err, err
    assert not history.exists(), _tree(history)
