"""Damaged history files and Spark's Java output, as an operator sees them (issue 33 items 7, 8):
``loadmgr replay`` and ``loadmgr longterm`` skip a truncated file and a file of another schema, and
no Java log line or stack trace reaches the terminal unless the log level is DEBUG."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.longterm.history import partition_of
from tests.integration.conftest import ROOT, SPARK_TEST_CONF, spark_conf_dir
from tests.integration.replay_history import T0, write_history

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# what Java writes: log4j lines ("26/11/26 23:53:50 WARN ..."), stack frames, exception class names
JAVA = re.compile(r"^\s+at |^\d\d/\d\d/\d\d \d\d:\d\d:\d\d |Exception|^Caused by", re.MULTILINE)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("damaged-history")
    write_history(root)
    date, hour = partition_of(T0)
    part = root / "bundles" / f"date={date}" / f"hour={hour}"
    good = sorted(part.glob("*.parquet"))[0].read_bytes()
    (part / "part-truncated.parquet").write_bytes(good[: len(good) // 2])
    pq.write_table(pa.table({"time": ["x", "y"], "bundle": [1, 2]}), part / "part-other-schema.parquet")
    return root


@pytest.fixture(scope="module")
def conf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SPARK_CONF_DIR whose spark-defaults.conf gives the driver JVM the tests' quick-start flags and
    the jobs two shuffle partitions; the web UI stays on, as an operator's run has it."""
    conf = {k: v for k, v in SPARK_TEST_CONF.items() if k != "spark.ui.enabled"}
    return spark_conf_dir(tmp_path_factory.mktemp("spark-conf"), conf)


def _loadmgr(
    *argv: str, conf_dir: Path, debug: bool = False, tmp: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": str(conf_dir),
    }
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    env.pop("LOADMGR_DEBUG", None)
    env["LOADMGR_LOG_LEVEL"] = "DEBUG" if debug else "INFO"
    return subprocess.run(
        [sys.executable, "-m", "service", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_replay_skips_damaged_files_without_java_output(damaged: Path, conf_dir: Path) -> None:
    proc = _loadmgr(
        "replay", "--history", str(damaged), "--master", "local[1]", "--strategy", "BalancedShedder",
        conf_dir=conf_dir,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert JAVA.search(proc.stderr) is None, proc.stderr[-3000:]
    assert "BalancedShedder" in proc.stdout


def test_longterm_skips_damaged_files_without_java_output(
    damaged: Path, conf_dir: Path, tmp_path: Path
) -> None:
    proc = _loadmgr(
        "longterm", "--history", str(damaged), "--from", "2024-03-09", "--to", "2024-03-11", "--dry-run",
        "--master", "local[1]", conf_dir=conf_dir, tmp=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert JAVA.search(proc.stderr) is None, proc.stderr[-3000:]
    assert "dry run" in proc.stderr
    # issue 49: a dry run prints what it computed, and a clean run leaves no JVM log behind
    assert proc.stdout.splitlines()[0].split()[:2] == ["bundle", "samples"], proc.stdout
    assert len(proc.stdout.splitlines()) > 1
    assert list(tmp_path.glob("loadmgr-spark-*.log")) == []


def test_java_output_shows_at_debug_level(monkeypatch: pytest.MonkeyPatch) -> None:
    from service.longterm.input import java_output_shown

    monkeypatch.delenv("LOADMGR_DEBUG", raising=False)
    monkeypatch.setenv("LOADMGR_LOG_LEVEL", "info")
    assert not java_output_shown()
    monkeypatch.setenv("LOADMGR_LOG_LEVEL", "debug")
    assert java_output_shown()
