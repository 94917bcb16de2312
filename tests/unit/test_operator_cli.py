"""Operator paper cuts: serve's session timeout flag, a quiet scheduler log, moves printed without None."""

from __future__ import annotations

import argparse
import logging
import sys
import threading

import pytest

from balancer.config import LoadBalancerConfig
from service.commands import serve
from service.commands.client import _decision_text, move_text
from service.leader.schedule import JOB_NAMES, LeaderSchedule


def _serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers())
    return parser.parse_args(["serve", *argv])


def test_serve_session_timeout_reaches_the_settings() -> None:
    assert serve.settings_from_args(_serve_args("--session-timeout", "4.5")).zk_session_timeout_s == 4.5
    assert serve.settings_from_args(_serve_args()).zk_session_timeout_s == 10.0


def test_scheduler_job_runs_leave_no_info_lines(caplog: pytest.LogCaptureFixture) -> None:
    ran = threading.Event()
    schedule = LeaderSchedule()
    config = LoadBalancerConfig.from_dict({"loadBalancerSheddingIntervalMinutes": 0.2 / 60})
    schedule.apply(config, dict.fromkeys(JOB_NAMES, ran.set), leading=True)
    caplog.set_level(logging.INFO)  # as `serve` runs by default
    try:
        schedule.start()
        assert ran.wait(10), "no job ran"
        schedule.wake("shedding")
        ran.clear()
        assert ran.wait(10)
    finally:
        schedule.shutdown()
    noise = [r.getMessage() for r in caplog.records if r.name.startswith("apscheduler") and r.levelno < 30]
    assert noise == []


@pytest.mark.parametrize(
    ("source", "destination", "expected"),
    [
        ("b1", "b2", " b1 -> b2"),
        (None, "b2", " (unowned) -> b2"),
        ("b1", None, " b1 -> (placement decides)"),
        (None, None, ""),
    ],
)
def test_moves_print_without_none(source: str | None, destination: str | None, expected: str) -> None:
    assert move_text(source, destination) == expected
    text = _decision_text(
        {"kind": "manual", "bundle": "ns/0x0_0x1", "source": source, "destination": destination}
    )
    assert "None" not in text and text.startswith("manual: ns/0x0_0x1")


def test_serve_without_pyarrow_says_how_to_get_history_or_turn_it_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server image may lack the history extra: one clear line and exit 2, never a traceback."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    monkeypatch.delitem(sys.modules, "service.longterm.history", raising=False)
    import socket

    with socket.create_server(("127.0.0.1", 0)) as zk:  # something answers where ZooKeeper is named
        args = _serve_args("--zk", f"127.0.0.1:{zk.getsockname()[1]}", "--port", "0")
        assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "pyarrow" in err and "loadmgr[history]" in err and "--no-history" in err
