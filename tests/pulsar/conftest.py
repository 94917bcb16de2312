"""The real-broker tier: a 3-broker Apache Pulsar cluster (the pinned release, ``make pulsar``), real
``pulsar-client`` producers and ``loadmgr serve --mode pulsar`` processes.

One cluster serves each module (starting it takes ~20-40 s here): ``pulsar_cluster`` runs
ModularLoadManagerImpl, ``extensible_cluster`` ExtensibleLoadManagerImpl. ``make test`` hands the two
modules to two xdist workers; each cluster holds a machine-wide file lock for its lifetime, so the
two never run brokers at once on a 2-core machine (the modules' timeouts count test bodies only:
``func_only``, so the wait for the other tier's cluster is not charged to a test). Missing jars skip the tier
on a developer's machine with the command that fetches them; under CI (``CI`` set) they fail it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pluggy
import pytest

from service.errors import ExecutorError
from service.pulsar.cluster import PulsarCluster
from service.pulsar.runtime import PulsarLaunchError, find_pulsar_lib
from service.zookeeper.server.process import free_port
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, every: float = 0.5) -> Any:
    budget = scaled(timeout)  # a quiet machine's budget, stretched on a loaded one (tests/timing.py)
    deadline = time.monotonic() + budget
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        # ExecutorError: Pulsar's own answer to a lookup made mid-move (HTTP 500 "Failed to acquire
        # ownership"); the lookups here are clients too, and it passes.
        except (httpx.HTTPError, OSError, ValueError, KeyError, ExecutorError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {budget:.0f} s waiting for {what} (last: {last!r})")


@contextlib.contextmanager
def _one_cluster_at_a_time() -> Iterator[None]:
    path = Path(tempfile.gettempdir()) / "loadmgr-pulsar-tier.lock"
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _needs_pulsar() -> None:
    try:
        find_pulsar_lib()
    except PulsarLaunchError as e:
        if os.environ.get("CI"):
            pytest.fail(f"the real-broker tier needs Pulsar's jars under CI: {e}")
        pytest.skip(str(e))
    try:
        import pulsar  # noqa: F401
    except ImportError as e:
        pytest.fail(f"pulsar-client is not installed ({e}); `make setup` installs it")


@pytest.fixture(scope="module")
def pulsar_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarCluster]:
    _needs_pulsar()
    from service.pulsar.netns import netns_unavailable
    from service.pulsar.processes import cgroups_writable

    # A CPU quota per broker makes the CPU each reports its own and large enough to matter; a
    # network namespace per broker does the same for its NIC (service/pulsar/netns.py).
    cpus = [0.4, 0.4, 0.4] if cgroups_writable() else None
    no_netns = netns_unavailable()
    if no_netns is not None:  # the NIC test says so (fails under CI); the others run on loopback
        print(f"brokers share the host's NICs: {no_netns}")
    cluster = PulsarCluster(
        brokers_count=3,
        broker_cpus=cpus,
        base_dir=tmp_path_factory.mktemp("pulsar"),
        start_timeout_s=scaled(180),
        own_hosts=no_netns is None,
    )
    with _one_cluster_at_a_time():
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture(scope="module")
def extensible_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarCluster]:
    """3 brokers running ExtensibleLoadManagerImpl (their shedding and auto-split off, transfers on
    as by default), on loopback without CPU quotas: this tier's second cluster stays cheap."""
    _needs_pulsar()
    from service.commands.pulsar_cluster import LOAD_MANAGERS

    cluster = PulsarCluster(
        brokers_count=3,
        base_dir=tmp_path_factory.mktemp("pulsar-extensible"),
        start_timeout_s=scaled(180),
        broker_settings={"loadManagerClassName": LOAD_MANAGERS["extensible"]},
    )
    with _one_cluster_at_a_time():
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()


class Serve:
    """One ``loadmgr serve --mode pulsar`` process."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc = proc
        self.url = url
        self.log = log
        self.http = httpx.Client(base_url=url, timeout=30)

    def readyz(self) -> dict[str, Any]:
        return dict(self.http.get("/readyz").json())

    def is_leader(self) -> bool:
        return bool(self.readyz()["details"].get("leader"))

    def decisions(self, kind: str | None = None) -> list[dict[str, Any]]:
        params = {"limit": "500", **({"kind": kind} if kind else {})}
        return list(self.http.get("/decisions", params=params).json()["decisions"])

    def written_moves(self, kind: str, ns: str) -> list[dict[str, Any]]:
        """``ns``'s moves of ``kind`` that were written, in release order. Moves are logged when
        planned; those that waited their turn under the disruption budget and were planned again
        were never written."""
        got = [
            d
            for d in self.decisions(kind)
            if d["applied"] and d["bundle"] and d["bundle"].startswith(ns + "/")
        ]
        return sorted(got, key=lambda d: d.get("releasedMs") or d["timeMs"])

    def metric(self, name: str) -> float | None:
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.http.close()

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


def _serve_factory(cluster: PulsarCluster, tmp_path: Path) -> Callable[..., Serve]:
    started: list[Serve] = []

    def start(extra_env: dict[str, str] | None = None, wait_ready: bool = True) -> Serve:
        port = free_port()
        log = tmp_path / f"serve-{port}.log"
        env = {
            **os.environ,
            "LOADMGR_MODE": "pulsar",
            "LOADMGR_ZK_HOSTS": str(cluster.zk_hosts),
            "LOADMGR_PULSAR_ADMIN_URL": ",".join(cluster.web_urls),
            "LOADMGR_HTTP_PORT": str(port),
            "LOADMGR_HISTORY_ENABLED": "false",
            "LOADMGR_ZK_SESSION_TIMEOUT_S": "6",
            "LOADMGR_PULSAR_CHECK_INTERVAL_S": "5",
            "LOADMGR_loadBalancerSheddingIntervalMinutes": "0.1",
            # Pulsar's clock is sped up 10 times here (a cycle every 6 s): 15 s between two unloads
            # at one broker becomes 1.5 s.
            "LOADMGR_loadBalancerUnloadSpacingSeconds": "1.5",
            **(extra_env or {}),
        }
        out = open(log, "wb")  # noqa: SIM115 - the child's log for its lifetime
        proc = subprocess.Popen(
            [sys.executable, "-m", "service", "serve"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        s = Serve(proc, f"http://127.0.0.1:{port}", log)
        started.append(s)
        if wait_ready:
            wait_for(lambda: s.readyz()["status"] == "ready", 60, f"serve on {port} ready\n{s.log_tail()}")
        return s

    start.started = started  # type: ignore[attr-defined] # read by the report hook below
    return start


@pytest.fixture
def serve(pulsar_cluster: PulsarCluster, tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    start = _serve_factory(pulsar_cluster, tmp_path)
    yield start
    for s in start.started:  # type: ignore[attr-defined]
        s.stop()


@pytest.fixture
def serve_ext(extensible_cluster: PulsarCluster, tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    """``serve`` beside the Extensible cluster."""
    start = _serve_factory(extensible_cluster, tmp_path)
    yield start
    for s in start.started:  # type: ignore[attr-defined]
        s.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """A failed test of this tier shows what each loadmgr process logged and decided: the cause is
    usually there (a CI run keeps nothing else)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    start = funcargs.get("serve") or funcargs.get("serve_ext")
    for s in getattr(start, "started", []):
        try:
            decided = "\n".join(
                f"{d.get('timeMs')} {d.get('kind')} {d.get('bundle')} {d.get('source')} -> "
                f"{d.get('destination')}: {d.get('explanation', {}).get('reason')}"
                for d in s.decisions()
            )
        except (httpx.HTTPError, OSError, ValueError, KeyError) as e:
            decided = f"(not read: {e!r})"
        report.sections.append((f"loadmgr serve {s.url}: log", s.log_tail(80)))
        report.sections.append((f"loadmgr serve {s.url}: decisions", decided))
