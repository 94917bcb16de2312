"""Issue 34's CLI over a running demo: every verb finds the demo without flags (its state file),
pulsar-admin's argument forms, -o json|yaml|table, split naming its children, and errors as one line with
the CLI's exit codes (2: the caller's mistake, 1: nothing answering)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from service.commands.cli import main
from service.demo.cluster import NAMESPACE, Demo
from service.demo.state import read_state, state_path
from tests.e2e.conftest import TOKEN

pytestmark = pytest.mark.e2e


def _out(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return captured.out


def test_every_verb_finds_the_running_demo_without_flags(
    demo: Demo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("LOADMGR_URL", "LOADMGR_ZK_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    state = read_state()
    assert state is not None and state.pid == os.getpid(), state_path()
    assert state.url == demo.url and state.zk_hosts == demo._zk.hosts
    status = _out(["status"], capsys)
    assert status.startswith("leader: leader-") and "{" not in status  # named, not raw JSON
    assert all(b in status for b in demo.broker_ids)
    listed = yaml.safe_load(_out(["namespaces", "list", "-o", "yaml"], capsys))
    assert NAMESPACE in [r["namespace"] for r in listed]
    assert NAMESPACE in _out(["namespaces", "list"], capsys)
    brokers = json.loads(_out(["brokers", "-o", "json"], capsys))
    assert sorted(b["broker"] for b in brokers) == sorted(demo.broker_ids)
    listed_brokers = json.loads(_out(["brokers", "list", "--json"], capsys))  # pulsar-admin's verb
    assert sorted(b["broker"] for b in listed_brokers) == sorted(demo.broker_ids)
    config = json.loads(_out(["brokers", "get-dynamic-config", "-o", "json"], capsys))
    assert "loadBalancerSheddingIntervalMinutes" in config
    # ZooKeeper too: `--zk` is not needed either (the state file names the demo's).
    monkeypatch.setenv("LOADMGR_DEMO_STATE", str(state_path()))
    assert NAMESPACE in _out(["namespaces", "--zk", demo._zk.hosts, "list"], capsys)


def test_errors_are_one_line_with_the_cli_exit_codes(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--url", demo.url, "--token", TOKEN]
    missing = f"{NAMESPACE}/0x00000000_0x00000001"
    assert main(["unload", missing, *url]) == 2  # an unknown bundle: the caller's to fix
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadmgr: HTTP 404 UnknownBundle") and "\n" not in err and '{"' not in err
    assert main(["unload", "not-a-bundle", *url]) == 2
    assert "bundle" in capsys.readouterr().err
    assert main(["status", "--url", "http://127.0.0.1:9"]) == 1  # nothing answering: not the caller's
    assert "cannot reach http://127.0.0.1:9" in capsys.readouterr().err
    assert main(["namespaces", "create", "nope", *url]) == 2
    assert "tenant/namespace" in capsys.readouterr().err


def test_pulsar_admin_forms_unload_split_and_dynamic_config(
    scratch_demo: Demo, capsys: pytest.CaptureFixture[str]
) -> None:
    d = scratch_demo
    url = ["--url", d.url, "--token", TOKEN]
    # The demo sheds every 3 s (paced moves may land between the read and the unload): the owner is
    # read again when a move got there first.
    for _ in range(5):
        rows = json.loads(_out(["bundles", "--namespace", NAMESPACE, "-o", "json", *url], capsys))
        first = rows[0]
        rng = first["bundle"].rsplit("/", 1)[1]
        dest = next(b for b in d.broker_ids if b != first["owner"])
        moved = _out(["namespaces", "unload", NAMESPACE, "--bundle", rng, "-d", dest, *url], capsys)
        if f"{first['bundle']} {first['owner']} -> {dest}" in moved:
            break
    else:
        raise AssertionError(f"the unload never answered from the owner it was read on: {moved}")
    split = _out(["namespaces", "split-bundle", NAMESPACE, "--bundle", rng, *url], capsys)
    lo, hi = (int(x, 16) for x in rng.split("_"))
    mid = lo + (hi - lo) // 2
    assert f"split {first['bundle']}" in split
    assert f"{NAMESPACE}/0x{lo:08x}_0x{mid:08x}" in split and f"{NAMESPACE}/0x{mid:08x}_0x{hi:08x}" in split
    body = json.loads(
        _out(
            ["brokers", "update-dynamic-config",
             "--config", "loadBalancerBrokerOverloadedThresholdPercentage", "--value", "84",
             "-o", "json", *url],
            capsys,
        )
    )  # fmt: skip
    assert body["values"]["loadBalancerBrokerOverloadedThresholdPercentage"] == 84
    assert main(["brokers", "update-dynamic-config", "--config", "noSuchKey", "--value", "1", *url]) == 2
    assert "noSuchKey" in capsys.readouterr().err
