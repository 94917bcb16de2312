"""The vector runner over every shipped shedder vector, and its failure reporting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from balancer.vectors.runner import run_vector
from service.commands.cli import main

REPO = Path(__file__).resolve().parents[2]
SHEDDER_DIRS = [
    d
    for d in (REPO / "tests/vectors/shedders", REPO.parent / "shared/reference/vectors/shedders")
    if d.is_dir()
]


def _vectors() -> list[Path]:
    return sorted(f for d in SHEDDER_DIRS for f in d.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_every_shedder_vector_passes() -> None:
    files = _vectors()
    assert files, "no shedder vectors found"
    reports = [r for f in files for r in run_vector(f.name, _load(f))]
    failed = [r.line() for r in reports if not r.passed]
    assert not failed, "\n".join(failed)
    assert len(reports) >= len(files)


def test_cli_runs_the_directories_and_prints_the_total(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["vectors", "run", *map(str, SHEDDER_DIRS)])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    passed = sum(1 for line in out if line.startswith("PASS "))
    assert passed > 0
    assert out[-1] == f"{passed} passed, 0 failed"


def _wrong(tmp_path: Path) -> Path:
    data = _load(REPO / "tests/vectors/shedders/overload_broker_with_multiple_bundles.json")
    data["rounds"][0]["expected_unloads"] = {"broker-1": ["bundle-10", "bundle-1"]}
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(data))
    return path


def test_wrong_expectation_fails_with_a_readable_diff_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["vectors", "run", str(_wrong(tmp_path))])
    out = capsys.readouterr().out
    assert rc == 1
    assert f"FAIL {tmp_path / 'wrong.json'} [round 0]" in out
    assert "    unloads of broker-1: expected ['bundle-10', 'bundle-1'], got ['bundle-10', 'bundle-9']" in out
    assert "missing ['bundle-1'], unexpected ['bundle-9']" in out
    assert out.strip().endswith("0 passed, 1 failed")


def test_invalid_json_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    rc = main(["vectors", "run", str(tmp_path)])
    captured = capsys.readouterr()
    assert rc == 2
    assert str(bad) in captured.err


def test_missing_path_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vectors", "run", "/nonexistent/vectors.json"]) == 2
    assert "/nonexistent/vectors.json" in capsys.readouterr().err


def test_unknown_kind_and_unknown_strategy_are_failed_reports_not_crashes() -> None:
    [kind] = run_vector("k", {"kind": "no_such_kind", "input": {}})
    assert not kind.passed and "no_such_kind" in kind.diff[0]
    [strategy] = run_vector("s", {"strategy": "NoSuchShedder", "rounds": [{}]})
    assert not strategy.passed and "NoSuchShedder" in strategy.diff[0]


def test_round_without_expectations_and_malformed_round_fail() -> None:
    base = {"strategy": "OverloadShedder", "config": {}}
    [empty] = run_vector("e", {**base, "rounds": [{"brokers": {}}]})
    assert not empty.passed and "no expectation" in empty.diff[0]
    bad_round = {"brokers": {"b": {"cpu": {"usage": "lots"}}}, "expected_unloads": {}}
    [bad] = run_vector("m", {**base, "rounds": [bad_round]})
    assert not bad.passed and "invalid round" in bad.diff[0]


def test_derived_expectations_are_reported_separately() -> None:
    data = _load(REPO / "tests/vectors/shedders/threshold_broker_reach_threshold.json")
    data["rounds"][0]["derived_expected_unloads"] = {"broker-2": ["not-this-one"]}
    main_report, derived = run_vector("d", data)
    assert main_report.passed and main_report.round == "round 0"
    assert not derived.passed and derived.round == "round 0 derived"


def test_state_carries_across_rounds_of_one_file() -> None:
    data = _load(REPO / "tests/vectors/shedders/avg_hit_high_threshold.json")
    # Alone, the second round would be a first call: counters at 1, nothing unloaded.
    alone = {**data, "rounds": data["rounds"][1:]}
    assert [r.passed for r in run_vector("a", data)] == [True, True]
    assert [r.passed for r in run_vector("a", alone)] == [False]
