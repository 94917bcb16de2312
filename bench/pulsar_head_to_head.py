"""loadmgr against Pulsar's own load managers on real Pulsar 4.0.7 clusters, over several seeds.

Each run (one contender, one seed) gets a fresh cluster (3 brokers, each in its own cgroup with a CPU
quota and, by default, a network namespace of its own; plus one that joins) and the same phases,
driven by the real Python client:

1. ``skew``  — every bundle of ``public/skew`` (8 bundles, two of them, chosen by the seed, carrying
   half its traffic) and of ``public/hot`` starts on the first broker; balancing is switched on;
   (``boot``: a fourth broker starts, until it answers ready;)
2. ``join``  — the fourth broker has joined;
3. ``hot``   — ``public/hot`` (4 bundles) goes from noise level to 8x its rate;
4. ``quiet`` — nothing but the per-topic noise (every topic +-10% every 10 s, seeded) that runs
   throughout.

Workloads (``--workload``): ``standard`` (every broker, the joining one too, at ``--cpus`` cores)
and ``unequal`` (brokers at 0.3 / 0.4 / 0.6 cores, the joining one at 0.4; ``--broker-cpus``).

Contenders: ``threshold`` (ModularLoadManagerImpl + ThresholdShedder, Pulsar's default), ``avg``
(Modular + AvgShedder as shedder and placement), ``transfer`` (ExtensibleLoadManagerImpl +
TransferShedder), ``loadmgr`` (``loadmgr serve --mode pulsar`` with BalancedShedder, the brokers'
shedding off) and ``loadmgr-extensible`` (the same serve deciding for Extensible brokers, moving
bundles as transfers). Every contender's brokers get the same shortened intervals (COMMON);
loadmgr gets the same values. Every contender runs the same seeds and the same phase lengths.

Measured the same way for everyone: per-broker message rates, ownership and usage by
:mod:`bench.head_to_head_sampler`; failed sends, publish gaps and latencies from the producers'
acknowledgements; and a consumer on every topic checking the producers' sequence numbers, so an
acknowledged message never received is counted (:mod:`bench.head_to_head_clients`).

``python bench/pulsar_head_to_head.py --seeds 1 2 3 --workload standard --out bench/results/h2h``
runs every default contender on every seed (``--parallel`` at a time, each in its own process) and
writes ``<out>/<workload>/table.md``: median and worst over seeds per contender and phase, and one
row per run with the machine's load beside it. ``--report-only`` rebuilds it from the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.head_to_head_report import phase_table, runs_table
from bench.head_to_head_sampler import Sampler
from bench.head_to_head_summary import plot, summarise

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
EXTENSIBLE = {"loadManagerClassName": f"{PKG}.extensions.ExtensibleLoadManagerImpl"}


@dataclass(frozen=True)
class Contender:
    label: str
    broker_settings: Mapping[str, str] = field(default_factory=dict)
    # Balanced by ``loadmgr serve --mode pulsar`` (the brokers' own shedding stays off, the
    # launcher's default) instead of by the brokers' load manager switched on.
    loadmgr: bool = False
    loadmgr_env: Mapping[str, str] = field(default_factory=dict)  # LOADMGR_* on top of the defaults
    in_default: bool = True


CONTENDERS: dict[str, Contender] = {
    "threshold": Contender(
        "Modular + ThresholdShedder", {"loadBalancerLoadSheddingStrategy": f"{PKG}.impl.ThresholdShedder"}
    ),
    "avg": Contender(
        "Modular + AvgShedder",
        {
            "loadBalancerLoadSheddingStrategy": f"{PKG}.impl.AvgShedder",
            "loadBalancerLoadPlacementStrategy": f"{PKG}.impl.AvgShedder",
        },
    ),
    "transfer": Contender(
        "Extensible + TransferShedder",
        {**EXTENSIBLE, "loadBalancerLoadSheddingStrategy": f"{PKG}.extensions.scheduler.TransferShedder"},
    ),
    "loadmgr": Contender("loadmgr BalancedShedder (Pulsar mode)", loadmgr=True),
    # loadmgr deciding for Extensible brokers (issue 47): the same brokers as ``transfer`` with
    # their own shedding off (the launcher's default); serve recognises the kind by itself and
    # moves bundles as transfers.
    "loadmgr-extensible": Contender(
        "loadmgr BalancedShedder (Extensible brokers)", dict(EXTENSIBLE), loadmgr=True
    ),
}
DEFAULT_CONTENDERS = [n for n, c in CONTENDERS.items() if c.in_default]


@dataclass(frozen=True)
class Shape:
    """CPU quotas (cores): the three starting brokers', then the joining broker's."""

    cpus: tuple[float, float, float, float]


WORKLOADS = {"standard": Shape((0.4, 0.4, 0.4, 0.4)), "unequal": Shape((0.3, 0.4, 0.6, 0.4))}
PHASE_DEFAULTS = {"skew": 300.0, "join": 300.0, "hot": 300.0, "quiet": 180.0}


def plan(seed: int, scale: float) -> tuple[list[float], float, float]:
    """Per-bundle rates of ``public/skew`` (two hot bundles), and ``public/hot``'s per-bundle noise
    and hot rate, msg/s."""
    rng = random.Random(seed)
    skew = [100.0 * scale] * 8
    for i in rng.sample(range(8), 2):
        skew[i] = 350.0 * scale
    return skew, 25.0 * scale, 200.0 * scale


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


# ---- one run: one contender, one seed -----------------------------------------------------------------
def start_loadmgr(cluster: Any, run_dir: Path, name: str, contender: Contender) -> subprocess.Popen[bytes]:
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
        **contender.loadmgr_env,
    }
    log = open(run_dir / f"{name}-serve.log", "wb")  # noqa: SIM115 - the child's log
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "serve"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    threading.Thread(
        target=watch_view, args=(proc, port, run_dir / f"{name}-view.jsonl"), daemon=True
    ).start()
    return proc


def watch_view(proc: subprocess.Popen[bytes], port: int, out: Path, every_s: float = 30.0) -> None:
    """The leader's own view of each broker every ``every_s`` (its dry run's per-broker numbers:
    utilisation, target, capacity, hits), one JSON line each, for reading a run afterwards: why a
    phase ended where it did. A dry run changes nothing; the live leader's counters are not touched."""
    import urllib.request

    with out.open("a") as f:
        while proc.poll() is None:
            time.sleep(every_s)
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}/shedding/dry-run", method="POST", data=b""
                )
                with urllib.request.urlopen(req, timeout=20) as r:
                    doc = json.loads(r.read())
            except Exception as e:  # not yet leader, or stopping: the next poll tells
                doc = {"error": str(e)}
            shed = doc.get("shedding") or {}
            f.write(
                json.dumps(
                    {
                        "unix": round(time.time(), 1),
                        "brokers": shed.get("brokers"),
                        "moves": len(doc.get("moves") or []),
                    }
                )
                + "\n"
            )
            f.flush()


def wait_for(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if pred():
                return
        time.sleep(1)
    raise RuntimeError(f"timed out waiting for {what}")


def run_one(name: str, seed: int, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    from bench.head_to_head_clients import SequenceChecker, SequencedWorkload, stop_run
    from service.pulsar.admin import PulsarAdmin
    from service.pulsar.cluster import PulsarCluster
    from service.pulsar.workload import topics_for_bundles

    contender = CONTENDERS[name]
    settings = {**COMMON, **contender.broker_settings}
    if args.nic_gbps is not None:
        # Every broker's NIC limit, equal for all: small enough that this bench's traffic weighs in
        # each broker's bandwidth figure (its own with own hosts) as a NIC-bound cluster's would.
        settings["loadBalancerOverrideBrokerNicSpeedGbps"] = f"{args.nic_gbps:g}"
    cpus = args.broker_cpus
    cluster = PulsarCluster(
        brokers_count=3, broker_settings=settings, broker_cpus=list(cpus[:3]), own_hosts=args.own_hosts
    )
    meta: dict[str, Any] = {"started_utc": utc_now(), "uptime_start": uptime()}
    began = time.monotonic()
    serve: subprocess.Popen[bytes] | None = None
    work: Any = None
    checker: Any = None
    sampler: Sampler | None = None
    try:
        cluster.start()
        print(f"[{name} seed {seed}] cluster up in {cluster.startup_seconds:.0f}s", flush=True)
        admin = PulsarAdmin(cluster.web_urls)
        skew_rates, hot_noise, hot_rate = plan(seed, args.rate_scale)
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
        last_push = [time.monotonic()]

        def skewed() -> bool:
            # A bundle may land elsewhere (a lookup placed it before the unload, or the contender's
            # shedder moved it off the crowded target meanwhile: seen with ThresholdShedder, seed 2):
            # send it to the target again every 15 s, as an operator would.
            off = {topics[t] for t in topics if admin.lookup(t) != target}
            if off and time.monotonic() - last_push[0] > 15:
                last_push[0] = time.monotonic()
                for bundle in sorted(off):
                    with contextlib.suppress(Exception):
                        admin.unload(bundle, target)
            return not off

        wait_for(skewed, 180, "skewed start")
        probes = {b: next(t for t, bb in topics.items() if bb == b) for b in sorted(set(topics.values()))}
        # subscribed before the first send, so every acknowledged number can be checked
        checker = SequenceChecker(cluster.service_url, topics).start()
        work = SequencedWorkload(cluster.service_url, base).start()
        sampler = Sampler(admin, cluster, probes, args.poll)
        sampler.start()
        expected = sum(base.values())
        wait_for(lambda: sampler.rates and sum(sampler.rates[-1][1].values()) > 0.6 * expected, 180, "load")
        noise_rng = random.Random(seed + 1)
        rates = dict(base)
        stop_noise = threading.Event()

        def noise() -> None:
            while not stop_noise.wait(10):
                for t in sorted(rates):
                    work.set_rate(t, rates[t] * (1 + noise_rng.uniform(-0.1, 0.1)))

        threading.Thread(target=noise, daemon=True).start()
        phases: dict[str, list[float]] = {}

        def begin(phase: str) -> None:
            phases[phase] = [time.monotonic()]
            work.mark(phase)

        print(f"[{name} seed {seed}] load seen; setup {time.monotonic() - began:.0f}s", flush=True)
        begin("skew")  # balancing switched on now, for everyone
        if contender.loadmgr:
            serve = start_loadmgr(cluster, run_dir, name, contender)
        else:
            admin.update_dynamic_config("loadBalancerSheddingEnabled", "true")
        time.sleep(args.skew_s)
        phases["skew"].append(time.monotonic())
        begin("boot")  # the joining broker's JVM starts
        joined = cluster.add_broker(cpus=cpus[3])
        phases["boot"].append(time.monotonic())
        begin("join")
        print(f"[{name} seed {seed}] {joined.broker_id} joined", flush=True)
        time.sleep(args.join_s)
        phases["join"].append(time.monotonic())
        begin("hot")
        for t in rates:
            if t.startswith("persistent://public/hot/"):
                rates[t] = hot_rate
                work.set_rate(t, hot_rate)
        time.sleep(args.hot_s)
        phases["hot"].append(time.monotonic())
        begin("quiet")
        time.sleep(args.quiet_s)
        phases["quiet"].append(time.monotonic())
        work.mark("after")
        stop_noise.set()
        sampler.stop_event.set()
        sampler.join(timeout=60)
        time.sleep(3)
        work.stop()
        missing = checker.drain(work.acked_seqs)
        meta["uptime_end"] = uptime()
        meta["wall_s"] = time.monotonic() - began
        return summarise(
            name, contender.label, seed, settings, phases, sampler, work, checker, missing, topics, args, meta
        )
    finally:
        stop_run(serve, work, checker)
        cluster.stop()


# ---- driver -------------------------------------------------------------------------------------------
def positive(v: str) -> float:
    try:
        f = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {v!r}") from None
    if not f > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {v!r}")
    return f


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--contenders",
        default=",".join(DEFAULT_CONTENDERS),
        help=f"comma list of {','.join(CONTENDERS)} (default: {','.join(DEFAULT_CONTENDERS)})",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[1], help="every contender runs every seed")
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="standard")
    p.add_argument(
        "--broker-cpus",
        help="CPU quotas (cores) of the 3 starting brokers and the joining one, e.g. 0.3,0.4,0.6,0.4 "
        "(default: the workload's; --cpus for all four in the standard workload)",
    )
    p.add_argument("--cpus", type=positive, help="standard workload: every broker's CPU quota (default 0.4)")
    p.add_argument("--phase-seconds", type=positive, help="every phase's length unless given below")
    for phase, default in PHASE_DEFAULTS.items():
        p.add_argument(f"--{phase}-s", type=positive, help=f"default: --phase-seconds, else {default:g}")
    p.add_argument("--hold", type=positive, default=60.0, help="seconds max/min must stay <= 1.25")
    p.add_argument("--poll", type=positive, default=5.0, help="ownership and rate polling, seconds")
    p.add_argument("--rate-scale", type=positive, default=1.0, help="1.0 = 1,400 msg/s, 2,100 when hot")
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
    p.add_argument("--out", default="bench/results/h2h", help="directory for JSON, logs, plots, tables")
    p.add_argument("--report-only", action="store_true", help="the tables and plots from the JSON in --out")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = [c for c in names if c not in CONTENDERS]
    if bad or not names:
        p.error(f"--contenders: unknown {bad or args.contenders!r}; choose from {','.join(CONTENDERS)}")
    if args.parallel < 1:
        p.error(f"--parallel must be >= 1, got {args.parallel}")
    if len(set(args.seeds)) != len(args.seeds) or any(s < 0 for s in args.seeds):
        p.error(f"--seeds must be distinct and >= 0, got {args.seeds}")
    args.names = names
    for phase, default in PHASE_DEFAULTS.items():
        key = f"{phase}_s"
        if getattr(args, key) is None:
            setattr(args, key, args.phase_seconds or default)
    shape = WORKLOADS[args.workload].cpus
    if args.broker_cpus is not None:
        try:
            cpus = tuple(positive(v) for v in args.broker_cpus.split(","))
        except argparse.ArgumentTypeError as e:
            p.error(f"--broker-cpus {args.broker_cpus!r}: {e}")
        if len(cpus) != 4:
            p.error(
                f"--broker-cpus needs 4 values (3 brokers, then the joining one), got {args.broker_cpus!r}"
            )
        shape = cpus
    elif args.cpus is not None:
        if args.workload != "standard":
            p.error("--cpus sets the standard workload's quotas; use --broker-cpus with --workload unequal")
        shape = (args.cpus,) * 4
    args.broker_cpus = shape
    return args


def load_runs(root: Path, names: list[str], seeds: list[int]) -> list[dict[str, Any]]:
    runs = []
    for seed in seeds:
        for n in names:
            f = root / f"seed-{seed}" / f"{n}.json"
            if f.exists():
                runs.append(json.loads(f.read_text(encoding="utf-8")))
            else:
                print(f"missing: {f}", flush=True)
    return runs


def report(root: Path, runs: list[dict[str, Any]], footer: str = "") -> str:
    for r in runs:
        with contextlib.suppress(Exception):
            plot(r, root / f"seed-{r['seed']}" / f"{r['name']}.png")
    text = phase_table(runs) + "\n" + runs_table(runs) + footer
    (root / "table.md").write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    root = Path(args.out) / args.workload
    if args.one:
        if len(args.seeds) != 1:
            raise SystemExit(f"--one runs one seed, got {args.seeds}")
        run_dir = root / f"seed-{args.seeds[0]}"
        run_dir.mkdir(parents=True, exist_ok=True)
        result = run_one(args.one, args.seeds[0], args, run_dir)
        (run_dir / f"{args.one}.json").write_text(json.dumps(result), encoding="utf-8")
        return
    if args.report_only:
        print(report(root, load_runs(root, args.names, args.seeds)))
        return
    started, start_load = utc_now(), uptime()
    print(f"start {started}: {start_load}", flush=True)
    forwarded = list(argv if argv is not None else sys.argv[1:])
    began = time.monotonic()
    for seed in args.seeds:
        run_dir = root / f"seed-{seed}"
        run_dir.mkdir(parents=True, exist_ok=True)
        for i in range(0, len(args.names), args.parallel):
            procs = []
            for n in args.names[i : i + args.parallel]:
                log = open(run_dir / f"{n}.log", "wb")  # noqa: SIM115 - the child's log
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    *forwarded,
                    "--one",
                    n,
                    "--seeds",
                    str(seed),
                ]
                procs.append((n, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)))
            for n, proc in procs:
                print(f"seed {seed} {n}: exit {proc.wait()}", flush=True)
    wall = time.monotonic() - began
    footer = (
        f"\nwhole invocation: {started} UTC, {wall:,.0f} s wall; uptime at the start: `{start_load}`; "
        f"at the end: `{uptime()}`\n"
    )
    print(report(root, load_runs(root, args.names, args.seeds), footer), flush=True)


if __name__ == "__main__":
    main()
