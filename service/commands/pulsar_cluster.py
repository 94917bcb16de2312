"""``loadmgr pulsar-cluster``: a real Apache Pulsar cluster on loopback until Ctrl-C.

ZooKeeper (loadmgr's embedded one, or ``--zk``), Pulsar's cluster metadata, one bookie and N brokers
running ``ModularLoadManagerImpl`` with their own shedding and auto-split off, ready for
``loadmgr serve --mode pulsar`` (the command to run next is printed). ``--own-load-manager`` leaves
Pulsar's own shedding on instead (what loadmgr is compared against); ``--own-hosts`` gives each
broker a network namespace of its own (service/pulsar/netns.py), so each reports its own NIC.
"""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from balancer.errors import ConfigError
from service.commands import argtypes

LOAD_MANAGERS = {
    "modular": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "extensible": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
}


def register(sub: Any) -> None:
    p = sub.add_parser("pulsar-cluster", help="Run a real Apache Pulsar cluster on 127.0.0.1 until Ctrl-C")
    p.add_argument("--brokers", type=int, default=3, help="Number of brokers (default: 3)")
    p.add_argument("--zk", type=argtypes.zk_hosts, help="Use this ZooKeeper instead of an embedded one")
    p.add_argument("--cluster", default="loadmgr", help="Pulsar's clusterName (default: loadmgr)")
    p.add_argument(
        "--broker-cpus",
        help="CPU quota per broker, comma-separated (e.g. 1,1,0.5): heterogeneous brokers through cgroups",
    )
    p.add_argument("--heap-mb", type=int, default=320, help="Java heap per broker, MiB (default: 320)")
    p.add_argument("--bundles", type=int, default=4, help="defaultNumberOfNamespaceBundles (default: 4)")
    p.add_argument(
        "--own-load-manager",
        action="store_true",
        help="Leave the brokers' own shedding and auto-split on (Pulsar balancing itself, no loadmgr)",
    )
    p.add_argument("--load-manager", choices=sorted(LOAD_MANAGERS), default="modular")
    p.add_argument(
        "--own-hosts",
        action="store_true",
        help="Each broker in a network namespace of its own on a bridge (10.213.n.0/24; needs root), so "
        "the NIC each reports is its own traffic's; ZooKeeper and the bookie listen on the bridge",
    )
    p.add_argument(
        "--skewed-load",
        type=float,
        metavar="MSG_PER_S",
        help="Also produce this rate on each of 16 topics of public/skewed (8 bundles), every bundle "
        "first moved onto the first broker: a skewed cluster to balance (needs pulsar-client)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Any broker.conf setting for every broker (repeatable)",
    )
    p.set_defaults(func=_run)


def broker_settings(args: argparse.Namespace) -> dict[str, str]:
    settings: dict[str, str] = {"loadManagerClassName": LOAD_MANAGERS[args.load_manager]}
    if args.own_load_manager:
        settings.update({"loadBalancerSheddingEnabled": "true", "loadBalancerAutoBundleSplitEnabled": "true"})
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError("--set", item, "expected KEY=VALUE")
        settings[key.strip()] = value.strip()
    return settings


def parse_cpus(text: str | None, brokers: int) -> list[float] | None:
    if text is None:
        return None
    try:
        cpus = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError("--broker-cpus", text, "expected numbers such as 1,1,0.5") from None
    if not cpus or any(not 0.01 <= c <= 64 for c in cpus):
        raise ConfigError("--broker-cpus", text, "each quota must be between 0.01 and 64 CPUs")
    if len(cpus) != brokers:
        raise ConfigError("--broker-cpus", text, f"give one quota per broker ({brokers})")
    return cpus


def _run(args: argparse.Namespace) -> int:
    from service.pulsar.cluster import PulsarCluster
    from service.pulsar.runtime import PulsarLaunchError, pulsar_version

    if not 1 <= args.brokers <= 16:
        raise ConfigError("--brokers", args.brokers, "between 1 and 16")
    if not 64 <= args.heap_mb <= 16384:
        raise ConfigError("--heap-mb", args.heap_mb, "between 64 and 16384")
    if not 1 <= args.bundles <= 1024:
        raise ConfigError("--bundles", args.bundles, "between 1 and 1024")
    if args.own_hosts and args.zk:
        raise ConfigError("--zk", args.zk, "--own-hosts starts its own ZooKeeper on the brokers' bridge")
    cluster = PulsarCluster(
        brokers_count=args.brokers,
        cluster=args.cluster,
        zk_hosts=args.zk,
        broker_heap_mb=args.heap_mb,
        broker_settings=broker_settings(args),
        broker_cpus=parse_cpus(args.broker_cpus, args.brokers),
        default_bundles=args.bundles,
        own_hosts=args.own_hosts,
    )
    stop = threading.Event()
    work: Any = None
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(
            f"starting Apache Pulsar {pulsar_version()}: {args.brokers} broker(s) and a bookie ...",
            flush=True,
        )
        try:
            cluster.start()
        except PulsarLaunchError as e:
            print(f"loadmgr: {e}", flush=True)
            return 2
        _describe(cluster, args)
        work = _skewed_load(cluster, args.skewed_load) if args.skewed_load else None
        while not stop.is_set():
            if not any(b.running for b in cluster.brokers):
                print("loadmgr: every broker has exited", flush=True)
                return 1
            stop.wait(1.0)
        return 0
    finally:
        if work is not None:
            work.stop()
            print(
                f"producers: {work.acked()} messages acknowledged, {work.failed()} failed sends", flush=True
            )
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        print("pulsar cluster stopped: brokers, bookie and ZooKeeper are down", flush=True)


def _describe(cluster: Any, args: argparse.Namespace) -> None:
    print(f"Pulsar cluster {cluster.cluster!r} ready in {cluster.startup_seconds:.1f} s", flush=True)
    print(f"  ZooKeeper (metadata and configuration store): {cluster.zk_hosts}")
    print(f"  bookie: {cluster.host_address}:{cluster.bookie_port}")
    for b in cluster.brokers:
        cpu = (
            f"own cgroup, {b.cpus:g} CPU"
            if b.cpus is not None
            else "own cgroup"
            if b.cgroup
            else "host-wide CPU"
        )
        nic = "; own NIC (network namespace)" if cluster.own_hosts else ""
        print(f"  broker {b.broker_id}: {b.web_url}  {b.service_url}  ({cpu}{nic}; log {b.log_path})")
    admin = ",".join(b.web_url for b in cluster.brokers)
    print(f"  clients: {cluster.service_url}")
    print(f"  admin:   {admin}")
    if args.own_load_manager:
        print("  the brokers' own shedding and auto-split are ON (Pulsar balances itself)")
    else:
        print("  the brokers' own shedding and auto-split are off: run loadmgr next, e.g.")
        print(
            f"    loadmgr serve --mode pulsar --zk {cluster.zk_hosts} --pulsar-admin-url {admin} --port 8080"
        )
    print("Ctrl-C stops everything.", flush=True)


def _skewed_load(cluster: Any, rate: float) -> Any:
    """public/skewed: 8 bundles, 2 topics each, all moved onto the first broker, then producers."""
    from service.pulsar.admin import PulsarAdmin
    from service.pulsar.skew import skew_namespace
    from service.pulsar.workload import Workload

    if not 0 < rate <= 100_000:
        raise ConfigError("--skewed-load", rate, "a rate per topic between 0 and 100000 msg/s")
    ns = "public/skewed"
    target = cluster.brokers[0].broker_id
    with PulsarAdmin(cluster.web_urls) as admin:
        topics = skew_namespace(admin, ns, 8, target).topics
    work = Workload(cluster.service_url, dict.fromkeys(topics, rate)).start()
    print(
        f"  producing {rate:g} msg/s on each of {len(topics)} topics of {ns}, all 8 bundles on {target}",
        flush=True,
    )
    return work
