"""Every placement, split and hash vector runs through the vector runner with zero failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from balancer.vectors.kinds import KIND_HANDLERS
from balancer.vectors.runner import run_vector

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
FILES = sorted(p for d in ("placement", "policies", "split", "hash") for p in (VECTORS / d).glob("*.json"))


def test_vectors_exist() -> None:
    assert len(FILES) >= 26


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_vector_passes(path: Path) -> None:
    data = json.loads(path.read_text())
    assert data["kind"] in KIND_HANDLERS
    reports = run_vector(path.name, data)
    assert reports, "no case was checked"
    failures = [r.line() for r in reports if not r.passed]
    assert not failures, "\n".join(failures)


def test_a_wrong_expectation_fails_with_a_diff() -> None:
    data = json.loads((VECTORS / "split" / "range_equally_divide.json").read_text())
    data["expected"]["boundaries"] = [1]
    (report,) = run_vector("mutated", data)
    assert not report.passed and "expected [1]" in report.diff[0]


def test_unknown_shape_is_reported_not_raised() -> None:
    reports = run_vector(
        "odd", {"kind": "placement", "source": "X#y", "config": {}, "input": {}, "expected": {}}
    )
    assert [r.passed for r in reports] == [False] and "X#y" in reports[0].diff[0]
