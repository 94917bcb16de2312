"""loadmgr against Pulsar's own load managers on a real Pulsar 4.0.7 cluster, one seeded workload.

Each contender gets its own fresh cluster (3 brokers, each in its own cgroup with a CPU quota, plus
one that joins) and the same phases, driven by the real Python client:

1. ``skew``  — every bundle of ``public/skew`` (8 bundles, two of them carrying half its traffic) and
   of ``public/hot`` starts on the first broker; balancing is switched on at the phase's start;
2. ``join``  — a fourth broker (same CPU quota) joins;
3. ``hot``   — ``public/hot`` (4 bundles) goes from noise level to 8x its rate;
4. ``quiet`` — nothing but the per-topic noise (every topic +-10% every 10 s, seeded) that runs
   throughout.

Contenders: ``threshold`` (ModularLoadManagerImpl + ThresholdShedder, Pulsar's default),
``avg`` (Modular + AvgShedder as shedder and placement), ``transfer`` (ExtensibleLoadManagerImpl +
TransferShedder), ``loadmgr`` (``loadmgr serve --mode pulsar`` with BalancedShedder, the brokers'
shedding off). Every contender's brokers get the same shortened intervals (COMMON below); loadmgr
gets the same values.

Measured the same way for everyone, from Pulsar and the clients: per-broker message rates from
``/admin/v2/broker-stats/topics`` of every broker, ownership from a lookup of one topic per bundle
every ``--poll`` seconds (a move is an owner change between polls), CPU and memory from each broker's
load report, failed sends, publish gaps and latencies from the producers' acknowledgements.

``python bench/pulsar_head_to_head.py --out bench/results/head_to_head`` runs all four (``--parallel``
at a time, each in its own process) and prints the table; ``--one NAME`` runs one contender.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.head_to_head_metrics import (
    in_windows,
    longest_gap_near,
    moves_from_ownership,
    percentile,
    spread,
    time_to_balance,
)

ROOT = Path(__file__).resolve().parents[1]
PKG = "org.apache.pulsar.broker.loadbalance"
# Equal for every contender (Pulsar's brokers and loadmgr alike). Interval and grace period are
# integers in Pulsar; the unload floors are scaled to what one producer process sends here.
COMMON = {
    "loadBalancerSheddingIntervalMinutes": "1",
    "loadBalancerSheddingGracePeriodMinutes": "1",
    "minUnloadMessage": "100",
    "minUnloadMessageThroughput": "10000",
    "loadBalancerBundleUnloadMinThroughputThreshold": "0.01",
}
CONTENDERS: dict[str, tuple[str, dict[str, str]]] = {
    "threshold": (
        "Modular + ThresholdShedder",
        {"loadBalancerLoadSheddingStrategy": f"{PKG}.impl.ThresholdShedder"},
    ),
    "avg": (
        "Modular + AvgShedder",
        {
            "loadBalancerLoadSheddingStrategy": f"{PKG}.impl.AvgShedder",
            "loadBalancerLoadPlacementStrategy": f"{PKG}.impl.AvgShedder",
        },
    ),
    "transfer": (
        "Extensible + TransferShedder",
        {
            "loadManagerClassName": f"{PKG}.extensions.ExtensibleLoadManagerImpl",
            "loadBalancerLoadSheddingStrategy": f"{PKG}.extensions.scheduler.TransferShedder",
        },
    ),
    "loadmgr": ("loadmgr BalancedShedder (Pulsar mode)", {}),
}
PHASES = ("skew", "join", "hot", "quiet")


def plan(seed: int, scale: float) -> tuple[list[float], float, float]:
    """Per-bundle rates of ``public/skew`` (two hot bundles), and ``public/hot``'s per-bundle noise
    and hot rate, msg/s."""
    rng = random.Random(seed)
    skew = [100.0 * scale] * 8
    for i in rng.sample(range(8), 2):
        skew[i] = 350.0 * scale
    return skew, 25.0 * scale, 200.0 * scale


# ---- one contender ------------------------------------------------------------------------------------
class Sampler(threading.Thread):
    def __init__(self, admin: Any, cluster: Any, probes: dict[str, str], every: float) -> None:
        super().__init__(daemon=True, name="sampler")
        self.admin, self.cluster, self.probes, self.every = admin, cluster, probes, every
        self.rates: list[tuple[float, dict[str, float]]] = []
        self.owners: list[tuple[float, dict[str, str]]] = []
        self.usage: list[tuple[float, dict[str, dict[str, float]]]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            began = time.monotonic()
            owners: dict[str, str] = {}
            for bundle, topic in self.probes.items():
                with contextlib.suppress(Exception):
                    owners[bundle] = self.admin.lookup(topic)
            t = time.monotonic()
            self.owners.append((t, owners))
            rates: dict[str, float] = {}
            for b in list(self.cluster.brokers):
                if not b.running:
                    continue
                with contextlib.suppress(Exception):
                    doc = self.admin.get_json("/admin/v2/broker-stats/topics", b.web_url)
                    rates[b.broker_id] = _sum_key(doc, "msgRateIn")
            self.rates.append((time.monotonic(), rates))
            if n % 3 == 0:
                self.usage.append((time.monotonic(), self._usage()))
            n += 1
            self.stop_event.wait(max(0.0, self.every - (time.monotonic() - began)))

    def _usage(self) -> dict[str, dict[str, float]]:
        """Each broker's resource usage in percent of its own limits: from its load report
        (Modular), else from its ``pulsar_lb_*_usage`` gauges on /metrics (Extensible, whose
        /broker-stats/load-report answers an error)."""
        out: dict[str, dict[str, float]] = {}
        for b in list(self.cluster.brokers):
            if not b.running:
                continue
            with contextlib.suppress(Exception):
                out[b.broker_id] = _usage_of(self.admin.load_report(b.web_url))
                continue
            with contextlib.suppress(Exception):
                text = self.admin.request("GET", "/metrics/", base=b.web_url).text
                out[b.broker_id] = lb_gauges(text)
        return out


USAGE_KEYS = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
GAUGES = {
    "pulsar_lb_cpu_usage": "cpu",
    "pulsar_lb_memory_usage": "memory",
    "pulsar_lb_directMemory_usage": "directMemory",
    "pulsar_lb_bandwidth_in_usage": "bandwidthIn",
    "pulsar_lb_bandwidth_out_usage": "bandwidthOut",
}


def _usage_of(report: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in USAGE_KEYS:
        r = report.get(k) or {}
        usage, limit = float(r.get("usage", -1.0)), float(r.get("limit", -1.0))
        out[k] = 100.0 * usage / limit if limit > 0 else -1.0
    out["cpuLimit"] = float((report.get("cpu") or {}).get("limit", -1.0))
    return out


def lb_gauges(text: str) -> dict[str, float]:
    """Pulsar's load-balancing gauges (percent) from a broker's Prometheus text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in GAUGES:
            out[GAUGES[name]] = float(line.rsplit(" ", 1)[1])
    if not out:
        raise ValueError("no pulsar_lb_* gauges")
    return out


def _sum_key(doc: Any, key: str) -> float:
    if isinstance(doc, dict):
        if isinstance(doc.get(key), int | float):
            return float(doc[key])
        return sum(_sum_key(v, key) for v in doc.values())
    return 0.0


def start_loadmgr(cluster: Any, out_dir: Path, name: str) -> subprocess.Popen[bytes]:
    from service.zookeeper.server.process import free_port

    port = free_port()
    env = {
        **os.environ,
        "LOADMGR_MODE": "pulsar",
        "LOADMGR_ZK_HOSTS": str(cluster.zk_hosts),
        "LOADMGR_PULSAR_ADMIN_URL": ",".join(cluster.web_urls),
        "LOADMGR_HTTP_PORT": str(port),
        "LOADMGR_HISTORY_ENABLED": "false",
        "LOADMGR_PULSAR_CHECK_INTERVAL_S": "5",
        "LOADMGR_loadBalancerLoadSheddingStrategy": "BalancedShedder",
        "LOADMGR_loadBalancerLoadPlacementStrategy": "BalancedShedder",
        **{f"LOADMGR_{k}": v for k, v in COMMON.items()},
    }
    log = open(out_dir / f"{name}-serve.log", "wb")  # noqa: SIM115 - the child's log
    return subprocess.Popen(
        [sys.executable, "-m", "service", "serve"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )


def wait_for(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if pred():
                return
        time.sleep(1)
    raise RuntimeError(f"timed out waiting for {what}")


def run_one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    from service.pulsar.admin import PulsarAdmin
    from service.pulsar.cluster import PulsarCluster
    from service.pulsar.workload import Workload, topics_for_bundles

    label, extra = CONTENDERS[name]
    out_dir = Path(args.out)
    settings = {**COMMON, **extra}
    if args.nic_gbps is not None:
        # Every broker's NIC limit, equal for all: small enough that this bench's traffic weighs in
        # each broker's bandwidth figure (its own with own hosts) as a NIC-bound cluster's would.
        settings["loadBalancerOverrideBrokerNicSpeedGbps"] = f"{args.nic_gbps:g}"
    cluster = PulsarCluster(
        brokers_count=3, broker_settings=settings, broker_cpus=[args.cpus] * 3, own_hosts=args.own_hosts
    )
    serve: subprocess.Popen[bytes] | None = None
    work: Any = None
    sampler: Sampler | None = None
    t_setup = time.monotonic()
    try:
        cluster.start()
        print(f"[{name}] cluster up in {cluster.startup_seconds:.0f}s", flush=True)
        admin = PulsarAdmin(cluster.web_urls)
        skew_rates, hot_noise, hot_rate = plan(args.seed, args.rate_scale)
        target = cluster.brokers[0].broker_id
        topics: dict[str, str] = {}  # topic -> "ns/range"
        base: dict[str, float] = {}
        for ns, n, per in (("public/skew", 8, 2), ("public/hot", 4, 1)):
            admin.request("PUT", f"/admin/v2/namespaces/{ns}", body={"bundles": {"numBundles": n}})
            ranges = admin.bundles(ns)
            found = topics_for_bundles(ns, ranges, per)
            for topic, rng in found.items():
                topics[topic] = f"{ns}/{rng}"
                i = ranges.index(rng)
                base[topic] = (skew_rates[i] if ns == "public/skew" else hot_noise) / per
            owner = {rng: admin.lookup(topic) for topic, rng in found.items()}
            for rng in ranges:
                if owner[rng] != target:  # ELM refuses a transfer to the owner itself
                    admin.unload(f"{ns}/{rng}", target)
        wait_for(lambda: all(admin.lookup(t) == target for t in topics), 180, "skewed start")
        probes = {b: next(t for t, bb in topics.items() if bb == b) for b in sorted(set(topics.values()))}
        work = Workload(cluster.service_url, base).start()
        sampler = Sampler(admin, cluster, probes, args.poll)
        sampler.start()
        expected = sum(base.values())
        wait_for(lambda: sampler.rates and sum(sampler.rates[-1][1].values()) > 0.6 * expected, 180, "load")
        rng = random.Random(args.seed + 1)
        rates = dict(base)
        stop_noise = threading.Event()

        def noise() -> None:
            while not stop_noise.wait(10):
                for t in sorted(rates):
                    work.set_rate(t, rates[t] * (1 + rng.uniform(-0.1, 0.1)))

        threading.Thread(target=noise, daemon=True).start()
        phases: dict[str, list[float]] = {}
        print(f"[{name}] load seen; setup {time.monotonic() - t_setup:.0f}s; phases start", flush=True)
        # skew: balancing switched on now, for everyone
        phases["skew"] = [time.monotonic()]
        if name == "loadmgr":
            serve = start_loadmgr(cluster, out_dir, name)
        else:
            admin.update_dynamic_config("loadBalancerSheddingEnabled", "true")
        time.sleep(args.skew_s)
        phases["skew"].append(time.monotonic())
        joined = cluster.add_broker(cpus=args.cpus)
        phases["join"] = [time.monotonic()]
        print(f"[{name}] {joined.broker_id} joined", flush=True)
        time.sleep(args.join_s)
        phases["join"].append(time.monotonic())
        phases["hot"] = [time.monotonic()]
        for t in rates:
            if t.startswith("persistent://public/hot/"):
                rates[t] = hot_rate
                work.set_rate(t, hot_rate)
        time.sleep(args.hot_s)
        phases["hot"].append(time.monotonic())
        phases["quiet"] = [time.monotonic()]
        time.sleep(args.quiet_s)
        phases["quiet"].append(time.monotonic())
        stop_noise.set()
        sampler.stop_event.set()
        sampler.join(timeout=60)
        time.sleep(3)
        work.stop()
        return summarise(name, label, settings, phases, sampler, work, topics, args)
    finally:
        if serve is not None and serve.poll() is None:
            serve.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                serve.wait(timeout=20)
        if work is not None:
            with contextlib.suppress(Exception):
                work.stop()
        cluster.stop()


def summarise(
    name: str,
    label: str,
    settings: dict[str, str],
    phases: dict[str, list[float]],
    sampler: Sampler,
    work: Any,
    topics: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    moves = moves_from_ownership(sampler.owners)
    t0 = phases["skew"][0]

    def phase_of(t: float) -> str:
        return next((p for p, (a, b) in phases.items() if a <= t < b), "outside")

    by_bundle: dict[str, list[str]] = {}
    for t, b in topics.items():
        by_bundle.setdefault(b, []).append(t)
    gap_per_move = [
        max(longest_gap_near(work.records[t].gaps, m.t - args.poll - 5, m.t + 5) for t in by_bundle[m.bundle])
        for m in moves
    ]
    windows = [(m.t - args.poll - 2, m.t + 10) for m in moves]
    lat_moves: list[float] = []
    lat_quiet: list[float] = []
    qa, qb = phases["quiet"]
    for rec in work.records.values():
        for s, lat in zip(rec.sent_at, rec.latency, strict=True):
            if windows and in_windows(s, windows):
                lat_moves.append(lat)
            if qa <= s < qb:
                lat_quiet.append(lat)
    ttb = {
        p: time_to_balance(sampler.rates, a, b, hold_s=args.hold)
        for p, (a, b) in phases.items()
        if p != "quiet"
    }
    end_spread = {
        p: percentile([spread(r) for t, r in sampler.rates if b - 60 <= t <= b], 50)
        for p, (a, b) in phases.items()
    }
    p99m, p99q = percentile(lat_moves, 99), percentile(lat_quiet, 99)
    return {
        "name": name,
        "label": label,
        "settings": settings,
        "own_hosts": args.own_hosts,  # a network namespace (own NIC) per broker
        "phases": {p: [a - t0, b - t0] for p, (a, b) in phases.items()},
        "time_to_balance_s": ttb,
        "median_spread_last_minute": end_spread,
        "moves": [
            {"t": m.t - t0, "bundle": m.bundle, "from": m.source, "to": m.destination, "phase": phase_of(m.t)}
            for m in moves
        ],
        "moves_per_phase": {p: sum(1 for m in moves if phase_of(m.t) == p) for p in (*PHASES, "outside")},
        "failed_sends": work.failed(),
        "acked": work.acked(),
        "gap_per_move_s": gap_per_move,
        "p99_ms_moves": None if p99m is None else 1000 * p99m,
        "p99_ms_quiet": None if p99q is None else 1000 * p99q,
        "rates": [[t - t0, r] for t, r in sampler.rates],
        "usage": [[t - t0, u] for t, u in sampler.usage],
    }


# ---- the table and the plots --------------------------------------------------------------------------
def _fmt(v: float | None, digits: int = 0) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| contender | balanced after skew (s) | after join (s) | after hot (s) | moves | moves in quiet "
        "| failed sends | longest gap per move max / mean (s) | p99 during moves (ms) | p99 quiet (ms) "
        "| max/min at end of skew / join / hot / quiet |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in results:
        gaps = r["gap_per_move_s"]
        ttb = r["time_to_balance_s"]
        ends = " / ".join(_fmt(r["median_spread_last_minute"][p], 2) for p in PHASES)
        rows.append(
            f"| {r['label']} | {_fmt(ttb['skew'])} | {_fmt(ttb['join'])} | {_fmt(ttb['hot'])} "
            f"| {len(r['moves'])} | {r['moves_per_phase']['quiet']} | {r['failed_sends']} of "
            f"{r['acked'] + r['failed_sends']:,} | {_fmt(max(gaps) if gaps else None, 1)} / "
            f"{_fmt(sum(gaps) / len(gaps) if gaps else None, 1)} | {_fmt(r['p99_ms_moves'])} "
            f"| {_fmt(r['p99_ms_quiet'])} | {ends} |"
        )
    return head + "\n".join(rows) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.5))
    brokers = sorted({b for _, r in result["rates"] for b in r})
    for b in brokers:
        pts = [(t / 60, r[b]) for t, r in result["rates"] if b in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=b, linewidth=1.2)
    for i, m in enumerate(result["moves"]):
        ax.axvline(m["t"] / 60, color="grey", alpha=0.5, linewidth=0.8, label="move" if i == 0 else None)
    for p, (a, _b) in result["phases"].items():
        ax.axvline(a / 60, color="black", linestyle="--", linewidth=1)
        ax.text(a / 60, ax.get_ylim()[1] * 0.95, f" {p}", fontsize=9)
    ax.set_xlabel("minutes since balancing was switched on")
    ax.set_ylabel("msg/s in (broker-stats/topics)")
    ax.set_title(f"{result['label']}: {len(result['moves'])} moves")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- driver -------------------------------------------------------------------------------------------
def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])

    def positive(v: str) -> float:
        f = float(v)
        if not f > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {v!r}")
        return f

    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma list of " + ",".join(CONTENDERS))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--skew-s", type=positive, default=300.0)
    p.add_argument("--join-s", type=positive, default=300.0)
    p.add_argument("--hot-s", type=positive, default=300.0)
    p.add_argument("--quiet-s", type=positive, default=180.0)
    p.add_argument("--hold", type=positive, default=60.0, help="seconds max/min must stay <= 1.25")
    p.add_argument("--poll", type=positive, default=5.0, help="ownership and rate polling, seconds")
    p.add_argument("--rate-scale", type=positive, default=1.0, help="1.0 = 1,400 msg/s, 2,100 when hot")
    p.add_argument("--cpus", type=positive, default=0.4, help="CPU quota per broker (cgroup)")
    p.add_argument("--parallel", type=int, default=1, help="contenders run at the same time")
    p.add_argument(
        "--nic-gbps",
        type=positive,
        help="loadBalancerOverrideBrokerNicSpeedGbps for every broker (default: the launcher's 1)",
    )
    p.add_argument(
        "--shared-nics",
        dest="own_hosts",
        action="store_false",
        help="brokers on loopback, all reading the host's NICs (default: a network namespace each, so "
        "each broker's NIC reading is its own; needs root)",
    )
    p.add_argument("--out", default="bench/results/head_to_head", help="directory for JSON, logs, plots")
    p.add_argument(
        "--report-only", action="store_true", help="table and plots from the JSON already in --out"
    )
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = [c for c in names if c not in CONTENDERS]
    if bad or not names:
        p.error(f"--contenders: unknown {bad or args.contenders!r}; choose from {','.join(CONTENDERS)}")
    if args.parallel < 1:
        p.error(f"--parallel must be >= 1, got {args.parallel}")
    args.names = names
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.one:
        result = run_one(args.one, args)
        (out / f"{args.one}.json").write_text(json.dumps(result), encoding="utf-8")
        return
    if args.report_only:
        results = [json.loads((out / f"{n}.json").read_text()) for n in args.names]
        for r in results:
            plot(r, out / f"{r['name']}.png")
        print(table(results))
        return
    uptime_start = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"start: {uptime_start}", flush=True)
    forwarded = list(argv if argv is not None else sys.argv[1:])
    began = time.monotonic()
    for i in range(0, len(args.names), args.parallel):
        batch = args.names[i : i + args.parallel]
        procs = []
        for n in batch:
            log = open(out / f"{n}.log", "wb")  # noqa: SIM115 - the child's log
            cmd = [sys.executable, str(Path(__file__).resolve()), *forwarded, "--one", n]
            procs.append((n, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)))
        for n, proc in procs:
            print(f"{n}: exit {proc.wait()}", flush=True)
    results = []
    for n in args.names:
        f = out / f"{n}.json"
        if f.exists():
            r = json.loads(f.read_text())
            results.append(r)
            plot(r, out / f"{n}.png")
    uptime_end = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    text = table(results)
    print(text)
    print(f"end: {uptime_end}; wall {time.monotonic() - began:.0f}s", flush=True)
    (out / "table.md").write_text(
        f"{text}\nstart: {uptime_start}\nend: {uptime_end}\nwall: {time.monotonic() - began:.0f}s\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
