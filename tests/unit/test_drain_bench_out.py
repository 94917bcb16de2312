"""bench/drain_vs_shutdown.py keeps one load manager's results apart from another's: a run refuses a
directory holding seeds of the other kind (rounds 1-3 ran Modular brokers and carry no field)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.drain_vs_shutdown import main, other_kind


def test_a_run_refuses_a_directory_of_the_other_load_managers_seeds(tmp_path: Path) -> None:
    (tmp_path / "seed-1.json").write_text(json.dumps({"seed": 1}))  # round 1-3 shape: Modular
    (tmp_path / "seed-2.json").write_text(json.dumps({"seed": 2, "load_manager": "extensible"}))
    assert other_kind(tmp_path, [1], "modular") is None
    assert "modular brokers" in (other_kind(tmp_path, [1], "extensible") or "")
    assert "extensible brokers" in (other_kind(tmp_path, [2], "modular") or "")
    assert other_kind(tmp_path, [3], "extensible") is None  # no such seed there yet
    (tmp_path / "seed-4.json").write_text("{not json")
    assert "unreadable" in (other_kind(tmp_path, [4], "modular") or "")


def test_the_refusal_comes_before_any_cluster_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "seed-1.json").write_text(json.dumps({"seed": 1}))
    with pytest.raises(SystemExit):
        main(["--load-manager", "extensible", "--seeds", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert f"--out {tmp_path}" in err and "holds a run on modular brokers" in err
    assert json.loads((tmp_path / "seed-1.json").read_text()) == {"seed": 1}  # untouched
