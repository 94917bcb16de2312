"""``loadmgr serve`` as a process refuses unsafe exposure before it touches ZooKeeper or a port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from service.zookeeper.server.process import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _serve(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOADMGR_")}
    # ZooKeeper is unreachable on purpose: the refusal must come first, not a connect timeout
    clean.update({"LOADMGR_ZK_HOSTS": "127.0.0.1:1", "LOADMGR_HISTORY_ENABLED": "false", **env})
    return subprocess.run(
        [sys.executable, "-m", "service", "serve", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("loadmgr:")]


def test_open_api_beyond_loopback_is_refused_and_nothing_listens() -> None:
    port = free_port()
    proc = _serve("--host", "0.0.0.0", "--port", str(port))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = _errors(proc)
    assert "no admin token" in line and "--insecure" in line
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # never bound


def test_token_in_argv_is_refused_without_echoing_it() -> None:
    proc = _serve("--token", "visible-in-ps")
    assert proc.returncode == 2
    (line,) = _errors(proc)
    assert "LOADMGR_API_TOKEN" in line and "visible-in-ps" not in proc.stderr


def test_unreadable_token_file_is_one_line(tmp_path: Path) -> None:
    proc = _serve("--token-file", str(tmp_path / "missing"))
    assert proc.returncode == 2
    (line,) = _errors(proc)
    assert "api_token_file" in line and "missing" in line
