"""``loadmgr zookeeper``: a real ZooKeeper in the foreground (one standalone server, or an ensemble of N
quorum peers with ``--ensemble N``), for local clusters, demos and trying a replicated setup."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from balancer.errors import ConfigError
from service.commands import argtypes
from service.zookeeper.server.ensemble import ENSEMBLE_SIZES

ENSEMBLE_HEAP_MB = 128  # per member: an ensemble on one machine is for trying replication, not for size


def register(sub: Any) -> None:
    p = sub.add_parser("zookeeper", help="Run an embedded ZooKeeper (or an ensemble) until Ctrl-C")
    p.add_argument(
        "--port", type=argtypes.port, help="Client port (default: a free one; not with --ensemble)"
    )
    p.add_argument("--data-dir", help="Data directory (default: a private temporary one)")
    p.add_argument(
        "--ensemble",
        type=_ensemble_size,
        metavar="N",
        help=f"Run N quorum peers ({', '.join(map(str, ENSEMBLE_SIZES))}) on free loopback ports, each "
        "with its own data dir and myid (under --data-dir if given)",
    )
    p.add_argument(
        "--heap-mb",
        type=argtypes.heap_mb,
        help="Java heap of each server, MiB, 64 up to this machine's memory (default: LOADMGR_ZK_HEAP_MB, "
        f"1024: enough for 100,000 bundles; with --ensemble, {ENSEMBLE_HEAP_MB} per member)",
    )
    p.set_defaults(func=_run)


def _ensemble_size(text: str) -> int:
    size = argtypes.positive_int(text)
    if size not in ENSEMBLE_SIZES:
        raise argparse.ArgumentTypeError(f"{size}: must be one of {', '.join(map(str, ENSEMBLE_SIZES))}")
    return size


def _run(args: argparse.Namespace) -> int:
    if args.ensemble is not None and args.port is not None:
        raise ConfigError(
            "--port", args.port, "does not apply to --ensemble (every member takes a free port)"
        )
    stop = threading.Event()
    # Ctrl-C and SIGTERM stop the server; the handlers they replace come back when it has stopped
    # (the command also runs in-process, where they were a test runner's for the rest of its session).
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _serve(args, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(args: argparse.Namespace, stop: threading.Event) -> int:
    if args.ensemble is not None:
        return _run_ensemble(args, stop)
    from service.settings import Settings
    from service.zookeeper.server.launcher import EmbeddedZooKeeper

    # LOADMGR_ZK_HEAP_MB is checked as --heap-mb is (a bad one: one line naming it, exit 2)
    heap_mb = args.heap_mb if args.heap_mb is not None else Settings().zk_heap_mb
    with EmbeddedZooKeeper(port=args.port, data_dir=args.data_dir, heap_mb=heap_mb) as zk:
        print(
            f"ZooKeeper serving at {zk.hosts} (pid {zk.pid}, heap {heap_mb} MiB); Ctrl-C to stop", flush=True
        )
        print(f"  export LOADMGR_ZK_HOSTS={zk.hosts}", flush=True)
        while not stop.wait(0.5):
            if not zk.running:
                print("loadmgr: ZooKeeper exited unexpectedly", file=sys.stderr)
                return 1
    print("ZooKeeper stopped", flush=True)
    return 0


def _run_ensemble(args: argparse.Namespace, stop: threading.Event) -> int:
    from service.zookeeper.server.ensemble import ZooKeeperEnsemble

    heap_mb = args.heap_mb if args.heap_mb is not None else ENSEMBLE_HEAP_MB
    with ZooKeeperEnsemble(args.ensemble, base_dir=args.data_dir, heap_mb=heap_mb) as ens:
        for m, mode in zip(ens.members, ens.modes(), strict=True):
            print(
                f"  member {m.myid}: 127.0.0.1:{m.port} (pid {m.pid}) {mode}, data {m.data_dir}", flush=True
            )
        print(
            f"ZooKeeper ensemble of {ens.size} serving at {ens.hosts} (heap {heap_mb} MiB each);"
            " Ctrl-C to stop",
            flush=True,
        )
        print(f"  export LOADMGR_ZK_HOSTS={ens.hosts}", flush=True)
        while not stop.wait(0.5):
            # A member that dies is reported, not fatal: the ensemble serves while a quorum is up.
            dead = [m.myid for m in ens.members if not m.running]
            if len(dead) > ens.size // 2:
                print(f"loadmgr: members {dead} exited; the ensemble has no quorum", file=sys.stderr)
                return 1
    print("ZooKeeper ensemble stopped", flush=True)
    return 0
