"""Issue 49, items 8 and 9: pulsar-admin's habits taken as typed, and output that tells one story in
every format (``true``/``false``, no ``None``, a split worded as a split, the brokers' verdicts)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.commands import client
from service.commands.cli import build_parser, main
from service.commands.output import cell
from service.commands.render import decision_text

Handler = Callable[[httpx.Request], httpx.Response]
BROKER = {
    "broker": "broker-1:8081",
    "usagePercent": {"cpu": 10.0, "memory": 5.0, "bandwidthIn": 1.0, "bandwidthOut": 1.0},
    "msgRateIn": 1.0,
    "msgRateOut": 1.0,
    "msgThroughputIn": 1.0,
    "msgThroughputOut": 1.0,
    "numBundles": 8,
}
CONFIG = {
    "values": {"loadBalancerSheddingEnabled": True, "loadBalancerSheddingIntervalMinutes": 1, "x": "y"},
    "dynamicKeys": ["loadBalancerSheddingEnabled", "loadBalancerSheddingIntervalMinutes"],
}
LEADER = {"leader": {"brokerId": "leader-8080", "serviceUrl": "http://127.0.0.1:8080"}, "isLeader": True}


def _answers(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path == "/brokers":
        return httpx.Response(200, json=[BROKER])
    if path == "/brokers/broker-1:8081":
        bundles = [f"public/default/0x{i:08x}_0x{i + 1:08x}" for i in range(10)]
        return httpx.Response(
            200,
            json={
                **BROKER,
                "scores": {},
                "bundles": bundles,
                "loadReport": {"cpu": {"usage": 1.0}, "lastStats": {}},
            },
        )
    if path == "/config":
        return httpx.Response(200, json=CONFIG)
    if path == "/leader":
        return httpx.Response(200, json=LEADER)
    if path.startswith("/lookup/"):
        topic = "persistent://" + path[len("/lookup/persistent/") :]
        return httpx.Response(
            200,
            json={
                "topic": topic,
                "bundle": "public/default/0x00000000_0x40000000",
                "broker": "broker-1:8081",
            },
        )
    if path == "/shedding/dry-run":
        shedding = {
            "summary": {"reason": "balanced", "message": "spread 3 points"},
            "brokers": {"broker-1:8081": {"reason": "within_band", "message": "cpu 40 % is within 5 of 42"}},
        }
        return httpx.Response(200, json={"moves": [], "skipped": [], "shedding": shedding, "changed": False})
    return httpx.Response(404, json={"error": "NotFound", "detail": path})


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    requests: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return _answers(request)

    monkeypatch.setattr(
        client, "_client", lambda _a: httpx.Client(base_url="http://t", transport=httpx.MockTransport(record))
    )
    return requests


def _out(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


# ---- item 8 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "path"),
    [
        (["brokers", "list", "pulsar-cluster"], "/brokers"),
        (["brokers", "leader-broker"], "/leader"),
        (["brokers", "list-dynamic-config"], "/config"),
        (["brokers", "get-runtime-config"], "/config"),
        (["broker-stats", "load-report"], "/brokers/broker-1:8081"),
        (["topics", "lookup", "persistent://public/default/t"], "/lookup/persistent/public/default/t"),
        (["--url", "http://t", "status"], "/brokers"),
    ],
)
def test_pulsar_admin_verbs_are_taken_as_typed(
    argv: list[str], path: str, seen: list[httpx.Request], capsys: pytest.CaptureFixture[str]
) -> None:
    _out(argv, capsys)
    assert path in [r.url.path for r in seen]
    assert not any(r.url.path.startswith("/brokers/") and "config" in r.url.path for r in seen)


def test_the_brokers_verbs_print_what_pulsar_admin_prints(
    seen: list[httpx.Request], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _out(["brokers", "list-dynamic-config"], capsys).split() == CONFIG["dynamicKeys"]
    assert "leader-8080" in _out(["brokers", "leader-broker"], capsys)
    assert "broker-1:8081" in _out(["topics", "lookup", "persistent://public/default/t"], capsys)
    runtime = _out(["brokers", "get-runtime-config"], capsys)
    assert '"y"' in runtime and "true" in runtime and "True" not in runtime


def test_split_algorithm_name_and_san_are_pulsar_admins_flags() -> None:
    for flag in ("--split-algorithm-name", "-san"):
        args = build_parser().parse_args(
            ["split", "public/default/0x00000000_0x40000000", flag, "range_equally_divide"]
        )
        assert args.algorithm == "range_equally_divide"


def test_a_word_that_is_neither_broker_nor_verb_is_refused_before_sending(
    seen: list[httpx.Request], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["brokers", "get-runtime-confg"]) == 2
    assert seen == [] and "brokers verb" in capsys.readouterr().err


def test_a_sub_verbs_usage_error_prints_its_own_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["namespaces", "unload", "public/default", "extra", "words"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: loadmgr namespaces unload" in err and "unrecognized arguments: extra words" in err


# ---- item 9 ---------------------------------------------------------------------------------------
def test_booleans_print_as_json_does() -> None:
    assert cell(True) == "true" and cell(False) == "false"


def test_dynamic_config_is_no_wider_than_its_content(
    seen: list[httpx.Request], capsys: pytest.CaptureFixture[str]
) -> None:
    out = _out(["brokers", "get-dynamic-config"], capsys)
    widest = max(len(line) for line in out.splitlines())
    assert widest <= len("loadBalancerSheddingIntervalMinutes") + 12, out
    assert "true" in out and "True" not in out


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (
            {"kind": "manual", "bundle": None, "explanation": {"message": "config updated"}},
            "manual:  (config updated)",
        ),
        (
            {
                "kind": "split",
                "bundle": "ns/0x00000000_0x80000000",
                "source": "b1",
                "destination": None,
                "explanation": {
                    "reason": "manual_split",
                    "numbers": {"children": ["c1", "c2"], "unload": True},
                },
            },
            "split: split ns/0x00000000_0x80000000 on b1 into c1, c2; "
            "children unloaded, placement decides their brokers",
        ),
    ],
)
def test_decisions_never_print_none_and_a_split_is_worded_as_one(
    decision: dict[str, Any], expected: str
) -> None:
    text = decision_text(decision)
    assert text == expected and "None" not in text and "->" not in text


def test_plain_dry_run_shows_each_brokers_verdict(
    seen: list[httpx.Request], capsys: pytest.CaptureFixture[str]
) -> None:
    out = _out(["dry-run"], capsys)
    assert "within_band" in out and "cpu 40 % is within 5 of 42" in out


def test_a_broker_row_counts_the_bundles_it_lists(
    seen: list[httpx.Request], capsys: pytest.CaptureFixture[str]
) -> None:
    out = _out(["brokers", "broker-1:8081"], capsys)
    row = next(line for line in out.splitlines() if line.startswith("broker-1:8081"))
    assert row.split()[-1] == "10" and "bundles (10)" in out


def test_replay_outputs_of_the_readme_are_ignored_by_git() -> None:
    root = Path(__file__).resolve().parents[2]
    ignored = (root / ".gitignore").read_text().split()
    assert "/replay.json" in ignored and "/replay-plots/" in ignored


def test_a_clean_spark_run_leaves_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from service.longterm import input as spark_input

    monkeypatch.setattr(spark_input.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(spark_input, "_KEEP_JAVA_LOG", [])
    log = spark_input.java_log_path()
    log.write_text("INFO ...")
    spark_input._drop_java_log()
    assert not log.exists()
    log.write_text("ERROR ...")
    spark_input.spark_error_line(RuntimeError("boom"))
    spark_input._drop_java_log()
    assert log.exists() and str(os.getpid()) in log.name  # a failed run keeps its JVM's words


def test_the_pulsar_clients_log_stays_off_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from service.pulsar.workload import client_logger

    monkeypatch.delenv("LOADMGR_LOG_LEVEL", raising=False)
    assert not client_logger().isEnabledFor(logging.ERROR)
    monkeypatch.setenv("LOADMGR_LOG_LEVEL", "DEBUG")
    assert client_logger().isEnabledFor(logging.ERROR)


def test_the_demo_title_fits_an_80_column_terminal() -> None:
    from rich.console import Console

    from service.demo.live import LiveView

    class FakeDemo:
        url = "http://127.0.0.1:8080"
        zk_hosts = "127.0.0.1:38211"

    view = LiveView.__new__(LiveView)
    view.demo = FakeDemo()  # type: ignore[assignment]
    console = Console(width=80, record=True)
    console.print(view._title())
    lines = console.export_text().splitlines()
    assert lines == ["loadmgr demo  REST http://127.0.0.1:8080  ZooKeeper 127.0.0.1:38211", "Ctrl-C to stop"]
    assert json.dumps(lines).count("127.0.0.1") == 2
