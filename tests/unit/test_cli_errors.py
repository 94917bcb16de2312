"""A table of bad command lines: each ends in one line on stderr naming the option and the value,
exit code 2, never a traceback, and nothing is started (all are refused before any connection)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]

BAD_LINES: list[tuple[list[str], str]] = [
    (["serve", "--port", "70000"], "--port"),
    (["serve", "--port", "-1"], "--port"),
    (["serve", "--port", "http"], "--port"),
    (["serve", "--zk", "::::"], "--zk"),
    (["serve", "--zk", "host:notaport"], "--zk"),
    (["serve", "--zk", "a:1,,b:2"], "--zk"),
    (["serve", "--zk", "a:1/"], "--zk"),
    (["serve", "--broker-conf", "/nonexistent/broker.conf"], "--broker-conf"),
    (["split", "public/default/0x00000000_0xffffffff", "--positions", "abc"], "--positions"),
    (["split", "public/default/0x00000000_0xffffffff", "--positions", "a,b"], "--positions"),
    (["split", "public/default/0x00000000_0xffffffff", "--positions", "0x200000000"], "--positions"),
    (["split", "public/default/0x00000000_0xffffffff", "--positions", ","], "--positions"),
    (["agent", "--broker-id", "a/b:1"], "--broker-id"),
    (["agent", "--broker-id", "b 1:80"], "--broker-id"),
    (["agent", "--broker-id", "noport"], "--broker-id"),
    (["agent", "--broker-id", ""], "--broker-id"),
    (["agent", "--broker-id", "b:1", "--ownership-poll", "0"], "--ownership-poll"),
    (["agent", "--broker-id", "b:1", "--ownership-poll", "nan"], "--ownership-poll"),
    (["agent", "--broker-id", "b:1", "--report-interval", "-1"], "--report-interval"),
    (["agent", "--broker-id", "b:1", "--session-timeout", "inf"], "--session-timeout"),
    (["agent", "--broker-id", "b:1", "--chroot", "pulsar"], "--chroot"),
    (["agent", "--broker-id", "b:1", "--zk", "::::"], "--zk"),
    (["config", "show", "--broker-conf", "/nonexistent"], "--broker-conf"),
    (["config", "show", "--broker-conf", "/"], "--broker-conf"),
    (["demo", "--port", "99999"], "--port"),
    (["demo", "--brokers", "0"], "--brokers"),
    (["demo", "--shed-interval", "0"], "--shed-interval"),
    (["simulate", "--scale", "abc"], "--scale"),
    (["simulate", "--cycles", "-3"], "--cycles"),
    (["zookeeper", "--port", "70000"], "--port"),
    # issue 33 item 10: values that used to be accepted and fail late, or through the catch-all
    (["zookeeper", "--heap-mb", "99999999"], "--heap-mb"),
    (["zookeeper", "--ensemble", "3", "--heap-mb", "1"], "--heap-mb"),
    (["zookeeper", "--ensemble", "4"], "--ensemble"),
    (["zookeeper", "--ensemble", "3", "--port", "2181"], "--port"),
    (["serve", "--no-history", "--cluster", "../x"], "--cluster"),
    (["serve", "--no-history", "--cluster", ".."], "--cluster"),
    (["serve", "--no-history", "--host", "999.1.1.1"], "--host"),
    (["serve", "--no-history", "--host", "192.0.2.1", "--insecure"], "192.0.2.1"),  # not this machine's
    (
        ["serve", "--no-history", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"],
        "c.pem",
    ),
    (["status", "--url", "not a url"], "--url"),
    (["status", "--url", "ftp://x:1"], "--url"),
    (["status", "--url", "http://[::1"], "--url"),
]

# issue 33 items 6 and 10: environment values checked before anything starts
BAD_ENV: list[tuple[dict[str, str], list[str], str]] = [
    ({"LOADMGR_MAX_REQUEST_BYTES": "-1"}, ["serve", "--no-history"], "LOADMGR_MAX_REQUEST_BYTES"),
    ({"LOADMGR_MAX_REQUEST_BYTES": "0"}, ["serve", "--no-history"], "LOADMGR_MAX_REQUEST_BYTES"),
    ({"LOADMGR_LOG_LEVEL": "BOGUS"}, ["serve", "--no-history"], "LOADMGR_LOG_LEVEL"),
    ({"LOADMGR_LOG_LEVEL": "BOGUS"}, ["agent", "--broker-id", "b:1"], "LOADMGR_LOG_LEVEL"),
    ({"LOADMGR_CLUSTER": "../x"}, ["serve", "--no-history"], "LOADMGR_CLUSTER"),
    ({"LOADMGR_HTTP_HOST": "999.1.1.1"}, ["serve", "--no-history"], "LOADMGR_HTTP_HOST"),
    ({"LOADMGR_ZK_HEAP_MB": "99999999"}, ["zookeeper"], "LOADMGR_ZK_HEAP_MB"),
    ({"LOADMGR_URL": "not a url"}, ["status"], "LOADMGR_URL"),
    ({"LOADMGR_ADVERTISED_URL": "lm-1:8080"}, ["serve", "--no-history"], "LOADMGR_ADVERTISED_URL"),
    ({"LOADMGR_LEADER_URLS": "http://a:1,file:///x"}, ["serve", "--no-history"], "LOADMGR_LEADER_URLS"),
]


@pytest.fixture(autouse=True)
def _nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reaching a service, an agent or a ZooKeeper server fails the case (exit 1, not 2)."""

    def started(*_a: object, **_k: object) -> None:
        raise AssertionError("started despite a bad value")

    from service.broker import agent
    from service.leader import service
    from service.zookeeper.server import ensemble, launcher

    monkeypatch.setattr(service.LoadManagerService, "__init__", started)
    monkeypatch.setattr(agent.BrokerAgent, "__init__", started)
    monkeypatch.setattr(launcher.EmbeddedZooKeeper, "__init__", started)
    monkeypatch.setattr(ensemble.ZooKeeperEnsemble, "__init__", started)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own exit after printing usage and the error line
        rc = int(e.code or 0)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "option"), BAD_LINES, ids=[" ".join(a) for a, _ in BAD_LINES])
def test_bad_command_line_is_one_line_and_exit_2(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = _run(argv, capsys)
    assert rc == 2, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("loadmgr") and option in last, err


@pytest.mark.parametrize(("env", "argv", "name"), BAD_ENV, ids=[" ".join(e) for e, _, _ in BAD_ENV])
def test_bad_environment_is_one_line_and_exit_2(
    env: dict[str, str],
    argv: list[str],
    name: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    rc, err = _run(argv, capsys)
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert name in err, err


def test_a_certificate_that_is_not_pem_is_refused_before_the_election(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("not a certificate")
    key.write_text("not a key")
    rc, err = _run(["serve", "--no-history", "--tls-cert", str(cert), "--tls-key", str(key)], capsys)
    assert rc == 2 and "cert.pem" in err and "Traceback" not in err, err


def test_non_utf8_broker_conf_and_bad_env(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"\xff\xfeloadBalancerEnabled=true")
    rc, err = _run(["config", "show", "--broker-conf", str(conf)], capsys)
    assert rc == 2 and "not UTF-8" in err and "Traceback" not in err
    # nobody at the URL `config show` asks first (a load manager on 8080 would answer instead)
    from service.zookeeper.server.process import free_port

    monkeypatch.setenv("LOADMGR_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("LOADMGR_HTTP_PORT", "abc")
    rc, err = _run(["config", "show"], capsys)
    assert rc == 2 and err.strip() == err.strip().splitlines()[0] and "LOADMGR_HTTP_PORT='abc'" in err
    monkeypatch.delenv("LOADMGR_HTTP_PORT")
    monkeypatch.setenv("LOADMGR_BROKER_CONF", str(tmp_path / "missing.conf"))
    rc, err = _run(["config", "show"], capsys)
    assert rc == 2 and "missing.conf" in err and "Traceback" not in err
    monkeypatch.delenv("LOADMGR_BROKER_CONF")
    monkeypatch.setenv("LOADMGR_loadBalancerSheddingIntervalMinutes", "-1")
    rc, err = _run(["config", "show"], capsys)
    assert rc == 2 and "loadBalancerSheddingIntervalMinutes" in err and "Traceback" not in err


def test_a_closed_stdout_is_not_a_traceback() -> None:
    """``loadmgr config show | head -0``: the reader is gone before the first write."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "config", "show"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=60)
    assert rc == 141 and "Traceback" not in err and "BrokenPipe" not in err, (rc, err)


def test_the_heap_reaches_every_ensemble_member(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--heap-mb`` with ``--ensemble`` used to be ignored (README lists it for both)."""
    from service.zookeeper.server import ensemble

    seen: dict[str, object] = {}

    def recording(self: object, size: int, **kw: object) -> None:
        seen.update(kw, size=size)
        raise RuntimeError("recorded")

    monkeypatch.setattr(ensemble.ZooKeeperEnsemble, "__init__", recording)
    rc, _ = _run(["zookeeper", "--ensemble", "3", "--heap-mb", "96"], capsys)
    assert rc == 1 and seen["size"] == 3 and seen["heap_mb"] == 96


def test_namespaces_without_zookeeper_is_one_line_on_stderr() -> None:
    """Issue 33 item 12: the error went to stdout, after up to eight kazoo "Connection dropped" lines."""
    from service.zookeeper.server.process import free_port

    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOADMGR_ZK_SESSION_TIMEOUT_S": "2"}
    env.pop("LOADMGR_LOG_LEVEL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "service", "namespaces", "--zk", f"127.0.0.1:{free_port()}", "list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Nothing answering is not the caller's mistake: exit 1, as every client verb (issue 34 item 5).
    assert proc.returncode == 1, proc
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("loadmgr: no ZooKeeper answers at 127.0.0.1:"), proc.stderr
