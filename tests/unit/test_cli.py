"""The command line answers --help for every sub-command and shows the effective config."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from service.commands.cli import build_parser, main


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "config" in out


def test_every_subcommand_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = list(sub.choices)  # type: ignore[attr-defined]
    assert "config" in names
    for name in names:
        res = subprocess.run(
            [sys.executable, "-m", "service.commands.cli", name, "--help"], capture_output=True, text=True
        )
        assert res.returncode == 0, (name, res.stderr)
        assert "usage:" in res.stdout


def test_config_show_prints_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_PREFIX_loadBalancerBrokerOverloadedThresholdPercentage", "70")
    assert main(["config", "show", "--local", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["loadBalancerBrokerOverloadedThresholdPercentage"] == 70
    assert shown["loadBalancerSheddingGracePeriodMinutes"] == 30
    assert main(["config", "show", "--local"]) == 0
    text = capsys.readouterr().out
    assert "(default 85)" in text


def test_bad_config_value_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULSAR_PREFIX_loadBalancerBrokerOverloadedThresholdPercentage", "lots")
    assert main(["config", "show", "--local"]) == 2
    err = capsys.readouterr().err
    assert "loadBalancerBrokerOverloadedThresholdPercentage" in err and "lots" in err


def test_zookeeper_heap_is_checked_before_java_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal, before anything starts
        main(["zookeeper", "--heap-mb", "10"])
    assert refused.value.code == 2
    assert "--heap-mb: 10 MiB is below the 64 MiB ZooKeeper needs" in capsys.readouterr().err
    # Run in-process, it gives the runner's Ctrl-C and SIGTERM back.
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    monkeypatch.setenv("LOADMGR_ZK_HEAP_MB", "lots")
    assert main(["zookeeper"]) == 2
    assert "LOADMGR_ZK_HEAP_MB='lots'" in capsys.readouterr().err
