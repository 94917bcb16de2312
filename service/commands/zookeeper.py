"""``loadmgr zookeeper``: a real ZooKeeper in the foreground (one standalone server, or an ensemble of N
quorum peers with ``--ensemble N``), for local clusters, demos and trying a replicated setup."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from service.commands import argtypes
from service.zookeeper.server.ensemble import ENSEMBLE_SIZES


def register(sub: Any) -> None:
    p = sub.add_parser("zookeeper", help="Run an embedded ZooKeeper (or an ensemble) until Ctrl-C")
    p.add_argument(
        "--port", type=argtypes.port, help="Client port (default: a free one; not with --ensemble)"
    )
    p.add_argument("--data-dir", help="Data directory (default: a private temporary one)")
    p.add_argument(
        "--ensemble",
        type=int,
        metavar="N",
        help=f"Run N quorum peers ({', '.join(map(str, ENSEMBLE_SIZES))}) on free loopback ports, each "
        "with its own data dir and myid (under --data-dir if given)",
    )
    p.add_argument(
        "--heap-mb",
        type=int,
        help="Java heap, MiB (default: LOADMGR_ZK_HEAP_MB, 1024: enough for 100,000 bundles)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
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
    from pydantic import ValidationError

    from service.settings import Settings
    from service.zookeeper.server.launcher import EmbeddedZooKeeper

    heap_mb = args.heap_mb
    if heap_mb is None:
        try:
            heap_mb = Settings().zk_heap_mb
        except ValidationError as e:
            err = e.errors()[0]
            print(f"loadmgr: LOADMGR_ZK_HEAP_MB={err.get('input')!r}: {err['msg']}")
            return 2
    if heap_mb < 64:
        print(f"loadmgr: --heap-mb must be at least 64 (MiB), got {heap_mb}")
        return 2
    with EmbeddedZooKeeper(port=args.port, data_dir=args.data_dir, heap_mb=heap_mb) as zk:
        print(
            f"ZooKeeper serving at {zk.hosts} (pid {zk.pid}, heap {heap_mb} MiB); Ctrl-C to stop", flush=True
        )
        print(f"  export LOADMGR_ZK_HOSTS={zk.hosts}", flush=True)
        while not stop.wait(0.5):
            if not zk.running:
                print("loadmgr: ZooKeeper exited unexpectedly")
                return 1
    print("ZooKeeper stopped", flush=True)
    return 0


def _run_ensemble(args: argparse.Namespace, stop: threading.Event) -> int:
    from service.zookeeper.server.ensemble import ZooKeeperEnsemble

    if args.ensemble not in ENSEMBLE_SIZES:
        print(f"loadmgr: --ensemble {args.ensemble}: must be one of {', '.join(map(str, ENSEMBLE_SIZES))}")
        return 2
    if args.port is not None:
        print("loadmgr: --port does not apply to --ensemble (every member takes a free port)")
        return 2
    with ZooKeeperEnsemble(args.ensemble, base_dir=args.data_dir) as ens:
        for m, mode in zip(ens.members, ens.modes(), strict=True):
            print(
                f"  member {m.myid}: 127.0.0.1:{m.port} (pid {m.pid}) {mode}, data {m.data_dir}", flush=True
            )
        print(f"ZooKeeper ensemble of {ens.size} serving at {ens.hosts}; Ctrl-C to stop", flush=True)
        print(f"  export LOADMGR_ZK_HOSTS={ens.hosts}", flush=True)
        while not stop.wait(0.5):
            # A member that dies is reported, not fatal: the ensemble serves while a quorum is up.
            dead = [m.myid for m in ens.members if not m.running]
            if len(dead) > ens.size // 2:
                print(f"loadmgr: members {dead} exited; the ensemble has no quorum")
                return 1
    print("ZooKeeper ensemble stopped", flush=True)
    return 0
