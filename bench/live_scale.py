"""The live leader at production scale, on a real ZooKeeper: sync, refresh, one shedding cycle.

    flock /tmp/loadmgr-heavy.lock nice -n 5 .venv/bin/python bench/live_scale.py \
        [--brokers 1000] [--bundles 100000] [--namespaces 100] [--heap-mb 1024] [--check-equal]

Starts an embedded ZooKeeper (``--heap-mb``) and has a cluster written into it: by default
(``--population raw``) by ``bench/raw_populate.py``, a child process of raw kazoo clients writing
Pulsar-shaped nodes by hand (nothing of loadmgr's own write path; see that module), or with
``--population synthetic`` by :mod:`service.demo.synthetic`, node for node as agents would (the
first half of the brokers hold every bundle and run hot). Then it runs the real leader code
(``LoadView``, ``LeaderJobs``) with BalancedShedder (see ``STRATEGY``), and reports in one run:

* first sync: the first refresh of a new term (everything read once, watches set);
* steady refresh: a refresh after 10% of the brokers rewrote their reports (each folded once into
  the bundle time averages), ``--refreshes`` more such (median and max: the garbage collector's
  full passes land in some), and one after nothing changed (nodes read are printed too: the claim is
  that no bundle node is read; ``--profile N`` prints the top N functions of one more such refresh);
* in-memory cycle: ``plan_shedding_cycle`` on deep copies of the leader's state, the yardstick;
* end-to-end cycle: ``LeaderJobs.shedding_cycle`` (refresh + reconcile + decide + write), its
  moves and the write rate of the batched, fenced moves;
* leader RSS (this process, which also holds the synthetic agents' copy of the cluster, so an
  upper bound) and ZooKeeper's live heap after a full GC (``jcmd GC.heap_info``).

Each timing is also printed as a ratio to the in-memory cycle of the same data. ``--check-equal``
then compares the watch-fed view with a full re-read (minutes at 100,000 bundles).

The disruption budget's caps are off (``--budget off``: a cycle writes its whole plan at once);
``--budget default`` keeps loadmgr's defaults (a plan released a few moves at a time).

``--serve-minutes M`` instead runs a real ``loadmgr serve`` process (Pulsar's one-minute shedding
interval) against the populated cluster for M minutes from when it leads, then reads its
``/metrics`` (once the last due run has finished) and its log, both as the service itself writes
them (``service.leader.schedule``): every shedding run due must have started and finished, one a
minute, and no job's run may have been missed, skipped (max instances) or have raised.
"""

from __future__ import annotations

import argparse
import copy
import gc
import itertools
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from balancer.config import LoadBalancerConfig  # noqa: E402
from balancer.cycle import plan_shedding_cycle  # noqa: E402
from balancer.pacing import BUDGET_KEYS  # noqa: E402
from bench.live_population import RawPopulation  # noqa: E402
from service.demo.synthetic import SyntheticCluster  # noqa: E402
from service.leader import heap  # noqa: E402
from service.leader.clock import now_ms  # noqa: E402
from service.leader.cluster_view import DecisionLog  # noqa: E402
from service.leader.executors import ZkExecutor  # noqa: E402
from service.leader.jobs import LeaderJobs  # noqa: E402
from service.leader.load_view import LoadView  # noqa: E402
from service.leader.metrics_sink import NoMetrics  # noqa: E402
from service.leader.service import make_strategies  # noqa: E402
from service.longterm.history import HistorySink  # noqa: E402
from service.zookeeper import paths as P  # noqa: E402
from service.zookeeper.metadata.store import ZkStore  # noqa: E402
from service.zookeeper.server.launcher import EmbeddedZooKeeper, four_letter_word  # noqa: E402

# The project's default strategy (as the demo, Helm chart and compose stack select it). Pulsar's
# ThresholdShedder + LeastLongTermMessageRate place each move by scanning every broker: 3.4 s for
# 3,189 moves over 200 brokers here, so minutes at 1,000 brokers and 10,000+ moves.
STRATEGY = "BalancedShedder"
CONFIG = {
    "loadBalancerBundleUnloadMinThroughputThreshold": 0.0,
    "loadBalancerLoadSheddingStrategy": STRATEGY,
    "loadBalancerLoadPlacementStrategy": STRATEGY,
    # This bench measures writing a whole cycle's plan at once: the disruption budget (issue 46) off.
    **dict.fromkeys(BUDGET_KEYS, 0),
}


# The disruption budget's keys (balancer.pacing.BUDGET_KEYS) are off (0) unless ``--budget default``.


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def zk_heap_mib(pid: int) -> float | None:
    """Live heap after a full GC (serial GC: young + tenured 'used'), or None without jcmd."""
    try:
        subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        out = subprocess.run(
            ["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = [int(k) for k in re.findall(r"generation\s+total \d+K, used (\d+)K", out)]
    return sum(used) / 1024 if used else None


def _proc_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 when unknown)."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reads(view: LoadView) -> dict[str, int]:
    assert view.cache is not None
    stats = view.cache.last_stats
    return {
        name: s.data_read + s.children_read + s.stats_read
        for name, s in stats.items()
        if s.data_read or s.children_read or s.stats_read
    }


def sample(metrics: str, name: str, **labels: str) -> float:
    """The value of ``name``'s series whose labels include ``labels`` in a ``/metrics`` text (0 if none)."""
    for m in re.finditer(rf"^{name}(?:{{([^}}]*)}})? ([0-9.e+-]+)$", metrics, re.M):
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(2))
    return 0.0


# service.leader.schedule's own log lines for the shedding job's runs (it silences APScheduler's).
RUN_LINE = re.compile(r"scheduled shedding run due (\d\d:\d\d:\d\d) (started|executed)$")
# The log line's own time (the run's start or end), before the logger's name.
STAMP = re.compile(r"^\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d)")
SKIP_LINE = re.compile(r"scheduled \S+ run due \S+ (not started|raised)")


def run_serve(hosts: str, minutes: float) -> dict[str, Any]:
    """A real ``loadmgr serve`` for ``minutes`` after it wins leadership: every shedding run due in
    that time must have started and finished, none missed or skipped, in its log and ``/metrics``."""

    import httpx

    from service.zookeeper.server.process import free_port

    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="live-scale-"))
    log_path = tmp / "serve.log"
    env = {
        **os.environ,
        "LOADMGR_ZK_HOSTS": hosts,
        "LOADMGR_ZK_SESSION_TIMEOUT_S": "30",
        "LOADMGR_HTTP_PORT": str(port),
        "LOADMGR_HISTORY_URI": str(tmp / "history"),
        **{f"LOADMGR_{k}": str(v) for k, v in CONFIG.items()},
    }
    base = f"http://127.0.0.1:{port}"

    def scrape() -> str:
        try:
            got = httpx.get(f"{base}/metrics", timeout=30)
        except httpx.HTTPError:
            return ""
        return got.text if got.status_code == 200 else ""

    def shedding(metrics: str, outcome: str) -> int:
        return int(sample(metrics, "loadmgr_scheduler_job_runs_total", job="shedding", outcome=outcome))

    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service", "serve"], cwd=ROOT, env=env, stdout=log_file, stderr=log_file
        )
        peak_rss = 0.0
        rss = RssSampler(proc.pid)
        rss.start()
        try:
            started = time.monotonic()
            while time.monotonic() - started < 180 and sample(scrape(), "loadmgr_is_leader") != 1:
                time.sleep(1)
            began = time.monotonic()
            print(f"serve leading after {began - started:.0f} s; running {minutes} min", flush=True)
            # /readyz says ready only once the term's first full sync and reconcile are done.
            while time.monotonic() - began < 600 and not _ready(base):
                time.sleep(0.5)
            ready_after = time.monotonic() - began
            rss_ready = rss.peak
            print(f"serve ready {ready_after:.1f} s after leading", flush=True)
            # Its jobs are scheduled from then on (service.leader.service._start_term).
            began = time.monotonic()
            # Runs fall due every 60 s from leadership on: the last one due in the window is started
            # a moment after it is due, and /metrics is read only once it has finished. Meanwhile an
            # operator unloads a bundle every few seconds, timed from outside as a user would see it.
            probe = OperatorProbe(base)
            probe.start()
            time.sleep(minutes * 60 + 5)
            probe.stop()
            window = time.monotonic() - began
            metrics = scrape()
            while time.monotonic() - began < window + 180 and shedding(metrics, "started") > (
                shedding(metrics, "executed") + shedding(metrics, "error")
            ):
                time.sleep(1)
                metrics = scrape()
            peak_rss = _peak_rss_mib(proc.pid)
            rss.stop()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    text = log_path.read_text(errors="replace")
    runs = [m.groups() for line in text.splitlines() if (m := RUN_LINE.search(line))]
    # Fixed delay (Pulsar's LoadSheddingTask): each run falls due one interval after the previous
    # one ended. Seconds from each end to the next due time, from the log lines' own times.
    ends = [
        st.group(1)
        for line in text.splitlines()
        if (m := RUN_LINE.search(line)) and m.group(2) == "executed" and (st := STAMP.search(line))
    ]
    skips = [line for line in text.splitlines() if SKIP_LINE.search(line)]
    # In log order, not sorted: the log has times of day only, and a run past midnight sorts first.
    dues = list(dict.fromkeys(due for due, what in runs if what == "started"))
    gaps = [(_seconds(b) - _seconds(a)) % 86_400 for a, b in itertools.pairwise(dues)]
    delays = [(_seconds(due) - _seconds(end)) % 86_400 for end, due in zip(ends, dues[1:], strict=False)]
    cycles = int(sample(metrics, "loadmgr_shedding_cycles_total"))
    total = sample(metrics, "loadmgr_shedding_cycle_duration_seconds_sum")
    not_started = sum(
        int(sample(metrics, "loadmgr_scheduler_job_runs_total", job=job, outcome=outcome))
        for job in ("shedding", "reconcile", "bundle-data", "split")
        for outcome in ("missed", "max_instances")
    )
    # Each manual unload against the shedding runs it overlapped (the log's times of day).
    spans = _run_spans(text)
    uptime_end = _uptime()
    during = [ms for at, ms, _ in probe.calls if any(a <= at <= b for a, b in spans)]
    out = {
        "serve_minutes": minutes,
        "operator_unloads": probe.summary(),
        "operator_unloads_during_shedding_ms": _spread(during),
        "shedding_phases": [line.split(PHASES, 1)[1] for line in text.splitlines() if PHASES in line],
        # Each shedding run's whole span in the log (started to executed, seconds), in order.
        "shedding_run_spans_s": [round(b - a, 2) for a, b in spans],
        "log_runs_started": sum(1 for _, what in runs if what == "started"),
        "log_runs_finished": sum(1 for _, what in runs if what == "executed"),
        "log_first_due": dues[0] if dues else None,
        "log_last_due": dues[-1] if dues else None,
        "log_gaps_s": sorted(set(gaps)),
        "log_end_to_next_due_s": sorted(set(delays)),
        "log_not_started_or_raised": len(skips),
        "metrics_started": shedding(metrics, "started"),
        "metrics_executed": shedding(metrics, "executed"),
        "metrics_error": shedding(metrics, "error"),
        "metrics_not_started_any_job": not_started,
        "metrics_job_failures": int(sample(metrics, "loadmgr_job_failures_total", job="shedding")),
        "cycles": cycles,
        "mean_cycle_s": total / cycles if cycles else None,
        "ready_after_leading_s": round(ready_after, 1),
        "leader_peak_rss_mib": round(peak_rss),
        # Sampled every 0.5 s: the peak by the time it was ready (first sync), and when the peak was.
        "leader_rss_peak_by_ready_mib": round(rss_ready),
        "leader_rss_peak_at": rss.peak_at,
        "leader_rss_end_mib": round(rss.last),
        # Each run's whole wall time (prefetch + lock wait + decide + write + publish), per job.
        "whole_run_mean_s": {
            job: round(sample(metrics, f"{WALL}_sum", job=job) / n, 2)
            for job in ("shedding", "reconcile", "bundle-data", "split")
            if (n := sample(metrics, f"{WALL}_count", job=job))
        },
        "whole_run_max_bucket_s": {
            job: _max_bucket(metrics, job) for job in ("shedding", "reconcile", "bundle-data", "split")
        },
        "serve_log": str(log_path),
        "uptime_end": uptime_end,
    }
    out["ok"] = (
        out["log_not_started_or_raised"] == 0
        and not_started == 0
        and out["metrics_error"] == 0
        and out["metrics_job_failures"] == 0
        # One interval from each run's end to the next due time (a second either way: log times are
        # whole seconds): a long run delays the next, nothing falls due meanwhile or is dropped.
        and all(59 <= d <= 61 for d in delays)
        and len(delays) == len(dues) - 1
        and cycles
        == out["metrics_started"]
        == out["metrics_executed"]
        == out["log_runs_started"]
        == out["log_runs_finished"]
        >= 1
    )
    print(
        f"serve: log {out['log_runs_started']} shedding runs started, {out['log_runs_finished']} finished "
        f"(due {out['log_first_due']} to {out['log_last_due']}, gaps {out['log_gaps_s']} s, "
        f"end to next due {out['log_end_to_next_due_s']} s), "
        f"{len(skips)} not started or raised; /metrics: {out['metrics_started']} started, "
        f"{out['metrics_executed']} executed, {out['metrics_error']} errors, {not_started} missed or "
        f"max-instances (all jobs), {cycles} cycles, mean {out['mean_cycle_s'] or 0:.2f} s; whole runs "
        f"(mean s) {out['whole_run_mean_s']}, at most (bucket) {out['whole_run_max_bucket_s']}; ready "
        f"{out['ready_after_leading_s']} s after leading; leader peak RSS {out['leader_peak_rss_mib']} MiB; "
        f"every run one interval after the previous ended, none dropped: {'PASS' if out['ok'] else 'FAIL'}",
        flush=True,
    )
    for line in skips[:5]:
        print("  ", line)
    print(
        f"operator unloads (REST, from outside): {out['operator_unloads']}; those that overlapped a "
        f"shedding run: {out['operator_unloads_during_shedding_ms']}",
        flush=True,
    )
    print(
        f"leader RSS: peak by ready {out['leader_rss_peak_by_ready_mib']} MiB, peak (sampled) at "
        f"{out['leader_rss_peak_at']}, at the end {out['leader_rss_end_mib']} MiB; shedding runs (s) "
        f"{out['shedding_run_spans_s']}",
        flush=True,
    )
    for line in out["shedding_phases"]:
        print("   shedding cycle:", line)
    return out


PHASES = "shedding cycle: "


class OperatorProbe:
    """``POST /bundles/<b>/unload`` to another broker every ``every_s`` seconds from a thread of
    the bench: each call's latency (ms) with the time of day it was sent, and its status."""

    def __init__(self, base: str, every_s: float = 3.0) -> None:
        import threading

        self.base, self.every_s = base, every_s
        self.calls: list[tuple[float, float, int]] = []  # (seconds of the day sent, ms, status)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="operator-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def _run(self) -> None:
        import datetime

        import httpx

        rng = random.Random(7)
        with httpx.Client(base_url=self.base, timeout=120) as http:
            brokers = [b["broker"] for b in http.get("/brokers").json()]
            bundles = [(r["bundle"], r["owner"]) for r in http.get("/bundles", params={"limit": 500}).json()]
            while not self._stop.wait(self.every_s):
                bundle, owner = rng.choice(bundles)
                dest = rng.choice([b for b in brokers if b != owner])
                now = datetime.datetime.now()
                sent = now.hour * 3600 + now.minute * 60 + now.second + now.microsecond / 1e6
                t0 = time.monotonic()
                try:
                    got = http.post(f"/bundles/{bundle}/unload", json={"destinationBroker": dest})
                    status = got.status_code
                except httpx.HTTPError:
                    status = 0
                self.calls.append((sent, (time.monotonic() - t0) * 1000, status))

    def summary(self) -> dict[str, Any]:
        return {
            **_spread([ms for _, ms, _ in self.calls]),
            "statuses": sorted({st for _, _, st in self.calls}),
        }


def _spread(ms: list[float]) -> dict[str, Any]:
    if not ms:
        return {"n": 0}
    ranked = sorted(ms)
    return {
        "n": len(ranked),
        "p50": round(ranked[len(ranked) // 2]),
        "p99": round(ranked[min(len(ranked) - 1, int(len(ranked) * 0.99))]),
        "max": round(ranked[-1]),
    }


def _run_spans(text: str) -> list[tuple[float, float]]:
    """(start, end) of each shedding run, in seconds of the day, from the log's own times."""
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for line in text.splitlines():
        m = RUN_LINE.search(line)
        st = re.match(r"\S+ (\d\d):(\d\d):(\d\d),(\d\d\d)", line)
        if not m or not st:
            continue
        h, mi, se, ms = (int(x) for x in st.groups())
        at = h * 3600 + mi * 60 + se + ms / 1000
        if m.group(2) == "started":
            start = at
        elif start is not None:
            spans.append((start, at))
            start = None
    return spans


WALL = "loadmgr_leader_job_run_duration_seconds"


def _ready(base: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{base}/readyz", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


class RssSampler:
    """The serve process's resident set every half second: its peak, when, and the last sample."""

    def __init__(self, pid: int) -> None:
        import threading

        self.pid, self.peak, self.last, self.peak_at = pid, 0.0, 0.0, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                text = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            m = re.search(r"^VmRSS:\s+(\d+)", text, re.M)
            if m:
                self.last = int(m.group(1)) / 1024
                if self.last > self.peak:
                    self.peak, self.peak_at = self.last, time.strftime("%H:%M:%S")


def _peak_rss_mib(pid: int) -> float:
    """The serve process's peak resident set (VmHWM): the leader alone."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _max_bucket(metrics: str, job: str) -> str:
    """The smallest histogram bucket holding every run of ``job`` (its longest run is at most that)."""
    count = sample(metrics, f"{WALL}_count", job=job)
    if not count:
        return "-"
    for m in re.finditer(rf"^{WALL}_bucket{{([^}}]*)}} ([0-9.e+-]+)$", metrics, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("job") == job and float(m.group(2)) >= count:
            return labels["le"]
    return "-"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _seconds(hms: str) -> int:
    h, m, s = (int(x) for x in hms.split(":"))
    return h * 3600 + m * 60 + s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--bundles", type=int, default=100_000)
    ap.add_argument("--namespaces", type=int, default=100)
    ap.add_argument("--heap-mb", type=int, default=1024)
    ap.add_argument("--check-equal", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--serve-minutes", type=float, help="run `loadmgr serve` this long instead")
    ap.add_argument("--profile", type=int, default=0, help="cProfile one more unchanged refresh: top N")
    ap.add_argument(
        "--profile-cycle", type=int, default=0, help="cProfile the end-to-end cycle (timed apart): top N"
    )
    ap.add_argument("--refreshes", type=int, default=10, help="more refreshes after reports changed")
    ap.add_argument(
        "--population",
        choices=("raw", "synthetic"),
        default="raw",
        help="raw: bench/raw_populate.py's kazoo clients write the cluster; synthetic: the project's own",
    )
    ap.add_argument(
        "--budget",
        choices=("off", "default"),
        default="off",
        help="off: the disruption budget's caps 0 (a cycle writes its plan at once); default: loadmgr's",
    )
    ap.add_argument(
        "--loaded-fraction",
        type=float,
        default=0.45,
        help="raw population: the share of brokers the bundles start on (lower: a bigger first plan)",
    )
    args = ap.parse_args()
    if not 0 < args.loaded_fraction <= 1:
        ap.error(f"--loaded-fraction must be in (0, 1], got {args.loaded_fraction}")
    if args.budget == "default":
        for key in BUDGET_KEYS:
            CONFIG.pop(key, None)
    out: dict[str, Any] = {
        "brokers": args.brokers,
        "bundles": args.bundles,
        "heap_mb": args.heap_mb,
        "budget": args.budget,
        "loaded_fraction": args.loaded_fraction,
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "uptime_start": _uptime(),
    }
    config = LoadBalancerConfig.from_dict(CONFIG)

    with EmbeddedZooKeeper(heap_mb=args.heap_mb) as zk:
        t0 = time.perf_counter()
        cluster: Any
        if args.population == "raw":
            cluster = RawPopulation(
                zk.hosts, args.brokers, args.bundles, args.namespaces, loaded_fraction=args.loaded_fraction
            )
            out["population"] = {"kind": "raw (bench/raw_populate.py, kazoo)", **cluster.summary}
            out["report_bytes"] = cluster.report_bytes()
        else:
            cluster = SyntheticCluster(
                zk.hosts,
                args.brokers,
                args.bundles,
                args.namespaces,
                brokers_per_session=20,
                session_timeout_s=30,
            )
            cluster.populate()
            out["population"] = {"kind": "synthetic (service/demo/synthetic.py)"}
            sizes = [len(json.dumps(cluster.report(b).to_json_dict())) for b in sorted(cluster.group_of)[:5]]
            out["report_bytes"] = max(sizes)
        out["populate_s"] = time.perf_counter() - t0
        print(
            f"populated ({out['population']['kind']}) in {out['populate_s']:.1f} s; largest sampled broker "
            f"report {out['report_bytes']} bytes",
            flush=True,
        )
        if args.serve_minutes:
            out.update(run_serve(zk.hosts, args.serve_minutes))
            if args.json:
                args.json.write_text(json.dumps(out, indent=2, default=str))
            cluster.close(purge=False)
            return 0 if out["ok"] else 1

        leader = ZkStore(zk.hosts, session_timeout_s=30)
        leader.start()
        fence = leader.bump_epoch("bench-leader")
        view = LoadView()
        executor = ZkExecutor(leader, lambda: fence)
        # As serve: a history sink takes every move written (its decision rows) and the cycle's rows.
        history = HistorySink(tempfile.mkdtemp(prefix="live-scale-history-"))
        jobs = LeaderJobs(
            leader, executor, executor, view, DecisionLog(500), NoMetrics(), history,
            lambda: True, lambda: fence.version, random.Random(1),
        )  # fmt: skip
        shedder, placement = make_strategies(config)
        strategies = (shedder, placement)

        t0 = time.perf_counter()
        view.refresh(leader, now_ms(), strategies)
        out["first_sync_s"] = time.perf_counter() - t0
        out["first_sync_reads"] = reads(view)
        heap.settle_after_sync()  # as serve does once the term's first sync is done
        print(f"first sync {out['first_sync_s']:.2f} s, reads {out['first_sync_reads']}", flush=True)

        t0 = time.perf_counter()
        view.refresh(leader, now_ms(), strategies)
        out["refresh_unchanged_s"] = time.perf_counter() - t0
        out["refresh_unchanged_reads"] = reads(view)
        if args.profile:  # a separate refresh: the profiler's overhead stays out of the timing
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.runcall(view.refresh, leader, now_ms(), strategies)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)

        changed = random.Random(2).sample(sorted(cluster.group_of), max(1, args.brokers // 10))
        cluster.write_reports(changed)
        time.sleep(0.5)  # let the watch events arrive
        t0 = time.perf_counter()
        view.refresh(leader, now_ms(), strategies)
        out["refresh_s"] = time.perf_counter() - t0
        out["refresh_reads"] = reads(view)
        print(
            f"steady refresh {out['refresh_s']:.2f} s after {len(changed)} reports changed (reads "
            f"{out['refresh_reads']}); unchanged {out['refresh_unchanged_s']:.2f} s (reads "
            f"{out['refresh_unchanged_reads']})",
            flush=True,
        )

        # The same again, each after another tenth of the reports changed: a pause of the garbage
        # collector's full pass lands in some of them, and the worst is what a cycle can meet.
        times = []
        for k in range(args.refreshes):
            cluster.write_reports(random.Random(3 + k).sample(sorted(cluster.group_of), len(changed)))
            time.sleep(0.5)
            t0 = time.perf_counter()
            view.refresh(leader, now_ms(), strategies)
            times.append(time.perf_counter() - t0)
        if times:
            out["refreshes_median_s"], out["refreshes_max_s"] = statistics.median(times), max(times)
            print(
                f"{len(times)} more such refreshes: median {out['refreshes_median_s']:.2f} s, max "
                f"{out['refreshes_max_s']:.2f} s",
                flush=True,
            )

        write_s = [0.0]
        # CPU seconds spent during the write by this process (all its threads: kazoo's connection
        # thread serialises requests and parses replies) and by the ZooKeeper server: whose time it is.
        write_cpu = {"leader": 0.0, "zookeeper": 0.0}
        applied = [0]
        unload_many = executor.unload_many

        def timed_unload_many(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            c, z = time.process_time(), _proc_cpu_s(zk.pid)
            try:
                result = unload_many(*a, **kw)
                applied[0] += len(result.done)
                return result
            finally:
                write_s[0] += time.perf_counter() - t
                write_cpu["leader"] += time.process_time() - c
                write_cpu["zookeeper"] += _proc_cpu_s(zk.pid) - z

        executor.unload_many = timed_unload_many  # type: ignore[method-assign]

        gc_time = {0: 0.0, 1: 0.0, 2: 0.0}
        gc_runs = {0: 0, 1: 0, 2: 0}
        gc_started = [0.0]

        def on_gc(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                gc_started[0] = time.perf_counter()
            else:
                gc_time[info["generation"]] += time.perf_counter() - gc_started[0]
                gc_runs[info["generation"]] += 1

        gc.callbacks.append(on_gc)

        def cycle(label: str) -> Any:
            write_s[0], applied[0] = 0.0, 0
            write_cpu["leader"] = write_cpu["zookeeper"] = 0.0
            for g in gc_time:
                gc_time[g], gc_runs[g] = 0.0, 0
            prof = None
            if args.profile_cycle:
                import cProfile

                prof = cProfile.Profile()
                prof.enable()
            t0 = time.perf_counter()
            plan = jobs.shedding_cycle(config, shedder, placement)
            took = time.perf_counter() - t0
            if prof is not None:
                import pstats

                prof.disable()
                if applied[0]:  # only a cycle that wrote is worth reading
                    pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile_cycle)
                    pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile_cycle)
            assert plan is not None
            out[f"{label}_s"] = took
            out[f"{label}_phases"] = dict(jobs.last_phases)
            out[f"{label}_moves"] = len(plan.moves)
            out[f"{label}_written"] = applied[0]
            out[f"{label}_write_s"] = write_s[0]
            out[f"{label}_write_cpu_s"] = {k: round(v, 3) for k, v in write_cpu.items()}
            # The garbage collector's passes during the cycle (by generation): time, count.
            out[f"{label}_gc"] = {g: [round(gc_time[g], 3), gc_runs[g]] for g in gc_time}
            print(
                f"{label}: {took:.2f} s, {len(plan.moves)} moves, {applied[0]} written in {write_s[0]:.2f} s "
                f"({applied[0] / write_s[0] if write_s[0] else 0:.0f} moves/s); phases "
                + ", ".join(f"{k} {v:.2f}" for k, v in jobs.last_phases.items())
                + f"; gc (s, passes) by generation {out[f'{label}_gc']}"
                + f"; CPU during the write, s: {out[f'{label}_write_cpu_s']}",
                flush=True,
            )
            return plan

        # BalancedShedder triggers on hit counts: its first cycle here (budget off) writes its whole plan.
        warm = cycle("first_cycle")
        out["warmup_moves"] = len(warm.moves)
        # The move tick (every second, under the service lock in serve) with that plan in flight.
        ticks = []
        for _ in range(5):
            t0 = time.perf_counter()
            jobs.move_tick(config)
            ticks.append(time.perf_counter() - t0)
        out["move_tick_s"] = {"in_flight": len(jobs.moves.in_flight()), "median": statistics.median(ticks)}
        print(f"move tick: {out['move_tick_s']}", flush=True)

        # The yardstick: the decision alone, on copies, so the real cycle below still has its work.
        load = view.load.model_copy(deep=True)
        ctx = copy.deepcopy(view.ctx)
        s2, p2 = copy.deepcopy(strategies)
        t0 = time.perf_counter()
        plan = plan_shedding_cycle(load, config, s2, p2, ctx, now_ms(), random.Random(1))
        out["in_memory_cycle_s"] = time.perf_counter() - t0
        print(f"in-memory cycle {out['in_memory_cycle_s']:.2f} s, {len(plan.moves)} moves", flush=True)
        del load, ctx, s2, p2, plan

        cluster.write_reports(changed)  # the cycle's refresh is a steady one too
        time.sleep(0.5)
        plan = cycle("cycle")
        out["moves"] = len(plan.moves)
        out["write_s"] = write_s[0]
        out["moves_applied"] = applied[0]
        out["moves_per_s"] = applied[0] / write_s[0] if write_s[0] else 0.0
        plan = warm if warm.moves else plan
        got = leader.get_json(P.assignment_path(plan.moves[0].bundle)) if plan.moves else None
        assert got is None or got.value["broker"] == plan.moves[0].destination

        history.close()
        out["history"] = {
            "decision_rows_written": history.stats.rows_written["moves"],
            "decisions_dropped": getattr(history.stats, "decisions_dropped", None),
            "cycles_dropped": history.stats.cycles_dropped,
        }
        print(f"history: {out['history']}", flush=True)
        out["leader_rss_mib"] = rss_mib()
        out["zk_heap_mib"] = zk_heap_mib(zk.pid) if zk.pid else None
        mntr = four_letter_word("127.0.0.1", int(zk.hosts.rsplit(":", 1)[1]), "mntr")
        for key in ("zk_znode_count", "zk_watch_count", "zk_approximate_data_size"):
            m = re.search(rf"^{key}\s+(\d+)", mntr, re.M)
            out[key] = int(m.group(1)) if m else None
        print(
            f"bench process RSS {out['leader_rss_mib']:.0f} MiB; ZooKeeper live heap "
            f"{out['zk_heap_mib'] or 0:.0f} MiB of {args.heap_mb}; znodes {out['zk_znode_count']}, "
            f"watches {out['zk_watch_count']}",
            flush=True,
        )
        base = out["in_memory_cycle_s"]
        for key in ("first_sync_s", "refresh_s", "refresh_unchanged_s", "cycle_s", "write_s"):
            out[key.removesuffix("_s") + "_ratio"] = out[key] / base
            print(f"  {key:22s} {out[key]:8.2f} s  = {out[key] / base:6.2f} x the in-memory cycle")

        if args.check_equal:
            t0 = time.perf_counter()
            snap = view.snapshot(leader, now_ms())
            assert snap.owners == cluster.admin.read_owners(), "owners differ"
            assert snap.assignments == cluster.admin.read_assignments(), "assignments differ"
            assert snap.brokers == cluster.admin.read_brokers(), "brokers differ"
            print(f"watch-fed view == full re-read (checked in {time.perf_counter() - t0:.0f} s)")
            out["equal_checked"] = True
        if args.json:
            args.json.write_text(json.dumps(out, indent=2, default=str))
        leader.stop()
        cluster.close(purge=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
