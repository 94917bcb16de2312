"""The Spark jobs on a real multi-worker cluster: a standalone master and two workers started from the
installed pyspark's ``spark-class``, loopback only, on free ports. ``loadmgr longterm`` and ``loadmgr
replay`` run against ``spark://`` and must give the same results as the same jobs on ``local[2]``; every
JVM the test started is gone afterwards."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from service.commands import longterm as longterm_cmd
from service.commands import replay as replay_cmd
from service.longterm.job import execute
from service.zookeeper.server.process import free_port
from tests.integration.conftest import QUICK_JVM, SPARK_TEST_CONF, spark_conf_dir
from tests.integration.replay_history import write_history

pyspark = pytest.importorskip("pyspark")

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
SPAN = ["--from", "2024-03-09T16:00:00Z", "--to", "2024-03-09T17:00:00Z"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
            # The master's REST submission server binds a fixed port (6066) by default: parallel runs collide.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,  # the master's and workers' JVMs
            "SPARK_NO_DAEMONIZE": "1",
        }
    )
    return env


class Standalone:
    """A master and its workers, each in its own process group so teardown reaches every JVM it forked."""

    def __init__(self, work: Path, workers: int = 2) -> None:
        self.work = work
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.n_workers = workers

    def _spawn(self, name: str, *args: str) -> None:
        log = self.work / f"{name}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            self.procs.append(
                subprocess.Popen(
                    [str(SPARK_HOME / "bin" / "spark-class"), *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=_env(),
                    cwd=self.work,
                    start_new_session=True,
                )
            )

    def start(self) -> None:
        self._spawn(
            "master", "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(free_port()),
        )  # fmt: skip
        self._wait(self.logs[0], "I have been elected leader", 120)
        for i in range(self.n_workers):
            work_dir = self.work / f"worker-{i}"
            work_dir.mkdir()
            self._spawn(
                f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                "--work-dir", str(work_dir), self.url,
            )  # fmt: skip
        for log in self.logs[1:]:
            self._wait(log, "Successfully registered with master", 120)

    def _wait(self, log: Path, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in log.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.3)
        raise AssertionError(f"{log.name}: no '{text}' within {timeout}s:\n{log.read_text(errors='replace')}")

    def executor_workers(self) -> set[str]:
        """Workers the master launched executors on, over the cluster's life."""
        text = self.logs[0].read_text(errors="replace")
        return set(re.findall(r"Launching executor \S+ on worker (\S+)", text))

    def stop(self) -> list[int]:
        """Stops every process group; returns the groups that still had a process after SIGKILL."""
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
        left = []
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)  # the group's stragglers (executors) after a grace period
            p.wait(10)
            if not _group_gone(p.pid, 15.0):
                left.append(p.pid)
        return left


def _group_gone(pgid: int, timeout: float) -> bool:
    """True once no process is left in the group (killed orphans take a moment to be reaped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    c = Standalone(tmp_path_factory.mktemp("spark-standalone"))
    try:
        c.start()
        yield c
    finally:
        assert c.stop() == [], "JVMs of the standalone cluster survived teardown"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("standalone-history")
    write_history(root)
    return root


def _loadmgr(*argv: str, conf_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *argv],
        env={**_env(), "SPARK_CONF_DIR": str(spark_conf_dir(conf_dir, SPARK_TEST_CONF))},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _in_process(spark: Any, *argv: str) -> int:
    """``loadmgr <argv>`` in this process, on its shared local[2] session."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    longterm_cmd.register(sub)
    replay_cmd.register(sub)
    args = parser.parse_args(argv)
    if argv[0] == "longterm":
        return execute(args, spark)
    return replay_cmd.run(replay_cmd.options_from_args(args), spark)


def _both(cluster: Standalone, spark: Any, *argv: str, out: Path, flag: str) -> None:
    """The command on the cluster as an operator runs it (``loadmgr ... --master spark://``), and the
    same job on local[2] in this process's shared session, side by side. (Not a second ``loadmgr``
    process: its Python and JVM start cost a minute on a loaded 2-core machine; the job is the same.)"""
    with ThreadPoolExecutor(1) as pool:
        on_cluster = pool.submit(
            _loadmgr, *argv, "--master", cluster.url, flag, str(out / "cluster"), conf_dir=out / "conf"
        )
        try:
            assert _in_process(spark, *argv, flag, str(out / "local")) == 0, "local[2]"
        finally:
            done = on_cluster.result()
    assert done.returncode == 0, f"{cluster.url}: {done.stderr[-3000:]}"


def _rows(path: Path) -> list[dict[str, Any]]:
    return list(ds.dataset(str(path), format="parquet").to_table().to_pylist())


def _close(a: Any, b: Any) -> bool:
    """Equal, up to summation order in floating point (the cluster adds partial sums in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-9)
    return bool(a == b)


def test_longterm_and_replay_on_a_standalone_cluster_equal_local(
    cluster: Standalone, history: Path, spark: Any, tmp_path: Path
) -> None:
    _both(
        cluster, spark, "longterm", "--history", str(history), *SPAN, "--dry-run", out=tmp_path, flag="--out"
    )
    for part, key, count in (("bundles", "bundle", 24), ("brokers", "broker", 4)):
        on_cluster = sorted(_rows(tmp_path / "cluster" / part), key=lambda r: r[key])
        on_local = sorted(_rows(tmp_path / "local" / part), key=lambda r: r[key])
        assert len(on_cluster) == count
        assert _close(on_cluster, on_local), part

    replays = tmp_path / "replay"
    replays.mkdir()
    _both(cluster, spark, "replay", "--history", str(history), *SPAN, out=replays, flag="--json")
    got = {n: json.loads((replays / n).read_text()) for n in ("cluster", "local")}
    for doc in got.values():
        for run in doc["runs"]:
            run.pop("seconds", None)  # wall time, not a result
    for key in ("cycles", "brokers", "bundles", "model", "runs", "recorded_replay_error", "model_error"):
        assert _close(got["cluster"][key], got["local"][key]), key
    assert got["cluster"]["cycles"] == 40 and len(got["cluster"]["runs"]) == 6
    # the cluster really ran the work: both workers got executors (longterm's and replay's apps)
    assert len(cluster.executor_workers()) == 2, cluster.logs[0].read_text()[-3000:]
