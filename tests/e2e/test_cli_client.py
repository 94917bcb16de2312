"""The CLI client commands against the running demo: tables by default, JSON with --json."""

from __future__ import annotations

import json

import pytest

from service.commands.cli import main
from service.demo.cluster import Demo

pytestmark = pytest.mark.e2e


def test_client_commands(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--url", demo.url]
    assert main(["status", *url]) == 0
    out = capsys.readouterr().out
    assert "leader:" in out and all(b in out for b in demo.broker_ids)
    assert main(["brokers", "--json", *url]) == 0
    assert sorted(b["broker"] for b in json.loads(capsys.readouterr().out)) == sorted(demo.broker_ids)
    assert main(["bundles", "--broker", demo.broker_ids[1], *url]) == 0
    assert "bundle" in capsys.readouterr().out
    assert main(["dry-run", "--json", *url]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is False
    row = json.loads(_run(["bundles", "--json", *url], capsys))[0]
    bundle = row["bundle"]
    assert main(["unload", bundle, *url]) == 2  # no token: refused, the caller's to fix
    assert "401" in capsys.readouterr().err
    # not its owner: an unload to the owner is refused (tests/integration/test_unload_to_owner.py)
    dest = next(b for b in reversed(demo.broker_ids) if b != row["owner"])
    assert main(["unload", bundle, "--destination", dest, "--token", demo.opts.token or "", *url]) == 0
    assert f"-> {dest}" in capsys.readouterr().out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_config_show_prints_the_running_leaders_config(
    demo: Demo, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's leader sheds every few seconds; this machine's defaults say every minute."""
    assert main(["config", "show", "--json", "--url", demo.url]) == 0
    captured = capsys.readouterr()
    shown = json.loads(captured.out)
    assert (
        shown["loadBalancerSheddingIntervalMinutes"]
        == demo.service.config.loadBalancerSheddingIntervalMinutes
    )
    assert shown["loadBalancerSheddingIntervalMinutes"] != 1.0
    assert "running leader" in captured.err and demo.url in captured.err
    assert main(["config", "show", "--url", demo.url]) == 0
    assert capsys.readouterr().out.startswith("# configuration of the running leader")
    # Nobody at the URL: the local configuration, said so on the first line.
    assert main(["config", "show", "--url", "http://127.0.0.1:9"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("# local configuration") and "no load manager answered" in first


def test_cli_lists_follow_the_rest_cursors(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    """Small pages give the same listing as one big one; --limit stops early and says where to go on."""
    url = ["--url", demo.url]
    whole = [r["bundle"] for r in json.loads(_run(["bundles", "--json", *url], capsys))]
    assert len(whole) > 3
    paged = [r["bundle"] for r in json.loads(_run(["bundles", "--json", "--page-size", "2", *url], capsys))]
    assert paged == whole
    assert main(["bundles", "--json", "--page-size", "2", "--limit", "3", *url]) == 0
    captured = capsys.readouterr()
    assert [r["bundle"] for r in json.loads(captured.out)] == whole[:3]
    cursor = captured.err.split("--cursor ", 1)[1].split()[0]
    rest = json.loads(_run(["bundles", "--json", "--cursor", cursor, *url], capsys))
    assert [r["bundle"] for r in rest] == whole[3:]
    decisions = json.loads(_run(["decisions", "--json", "--page-size", "1", "--limit", "2", *url], capsys))
    assert len(decisions) <= 2 and all("kind" in d for d in decisions)
