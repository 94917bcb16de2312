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


# Each name as `python -m service.commands.cli <name> --help` runs it (runpy, as __main__), all in one
# Python process with its output and exit per name: a process per name spent ~1.2 s of CPU each on
# imports alone (20 names, 56 s of a loaded machine's suite), and --help runs no command code.
_EVERY_HELP = """
import contextlib, io, json, runpy, sys, traceback, warnings
warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module is in sys.modules after the first
got = {}
for name in sys.argv[1:]:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["loadmgr", name, "--help"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("service.commands.cli", run_name="__main__", alter_sys=True)
            code = "returned without exiting"
        except SystemExit as e:
            code = e.code
        except Exception:
            code = traceback.format_exc()
    got[name] = [code, out.getvalue(), err.getvalue()]
json.dump(got, sys.__stdout__)
"""


def test_every_subcommand_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices is not None
    names = list(sub.choices)
    assert "config" in names
    res = subprocess.run([sys.executable, "-c", _EVERY_HELP, *names], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert list(got) == names
    for name, (code, out, err) in got.items():
        assert code == 0, (name, code, err)
        assert "usage:" in out, name


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
