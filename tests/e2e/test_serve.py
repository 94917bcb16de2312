"""``loadmgr serve`` as a process: it joins the demo's ZooKeeper, serves the API, and stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from service.demo.cluster import Demo, free_port

pytestmark = pytest.mark.e2e


def test_serve_answers_and_shuts_down_gracefully_on_sigterm(demo: Demo, tmp_path: object) -> None:
    port = free_port(0)
    env = {**os.environ, "LOADMGR_INSTANCE_ID": f"serve-{port}", "LOADMGR_CLUSTER": "e2e"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.commands.cli",
            "serve",
            "--zk",
            demo._zk.hosts,
            "--port",
            str(port),
            "--no-history",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                ready = False
            if ready:
                break
            time.sleep(0.3)
        assert ready, proc.stdout.read() if proc.poll() is not None and proc.stdout else "not ready in 30 s"
        leader = httpx.get(f"{url}/leader", timeout=5).json()
        assert leader["isLeader"] is False and leader["leader"]["serviceUrl"] == demo.url
        assert 'loadmgr_is_leader{cluster="e2e"} 0.0' in httpx.get(f"{url}/metrics", timeout=5).text
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_in_pulsar_mode_on_the_demos_agents_exits_2_naming_the_mode(demo: Demo) -> None:
    """The mistyped command that once left a whole demo cluster unowned: refused before it campaigns."""
    before = demo.service.election.fence()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.commands.cli",
            "serve",
            "--zk",
            demo._zk.hosts,
            "--port",
            str(free_port(0)),
            "--no-history",
            "--mode",
            "pulsar",
            "--pulsar-admin-url",
            "http://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LOADMGR_INSTANCE_ID": "wrong-mode"},
    )
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("loadmgr:")]
    assert len(errors) == 1 and "--mode zookeeper" in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert demo.service.is_leader() and demo.service.election.fence() == before
