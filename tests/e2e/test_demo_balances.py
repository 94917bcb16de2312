"""The demo starts skewed (every bundle on one broker) and the leader balances it within two minutes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from service.demo.cluster import Demo

pytestmark = pytest.mark.e2e


def test_skewed_cluster_becomes_balanced_within_two_minutes(demo: Demo) -> None:
    first = demo.broker_ids[0]
    assert demo.skewed_at_start[first] == demo.opts.bundles, demo.skewed_at_start
    assert demo.balanced_within, demo.out.getvalue()[-3000:]  # type: ignore[attr-defined]
    assert demo.balanced_after_s is not None and demo.balanced_after_s <= 120
    counts = demo.ownership_counts()
    assert all(n > 0 for n in counts.values()), counts
    moves = [d for d in demo.service.decisions(limit=500, kind="shedding") if d.source == first]
    assert moves and all(d.explanation.get("reason") for d in moves)


def test_loadmgr_demo_command_prints_url_table_moves_and_stops_cleanly() -> None:
    """What `make run` runs, bounded: it prints the REST URL, the table and moves, and stops on SIGINT."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.commands.cli",
            "demo",
            "--port",
            "0",
            "--brokers",
            "3",
            "--bundles",
            "6",
            "--shed-interval",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "balanced after" in line:
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        lines.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(lines)
    assert proc.returncode == 0, text
    assert "REST API at http://127.0.0.1:" in text
    assert "cpu%" in text and "shedding:" in text and "balanced after" in text, text
    assert "ZooKeeper are down" in text
