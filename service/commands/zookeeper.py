"""``loadmgr zookeeper``: a real standalone ZooKeeper in the foreground, for local clusters and demos."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from service.commands import argtypes


def register(sub: Any) -> None:
    p = sub.add_parser("zookeeper", help="Run an embedded ZooKeeper until Ctrl-C")
    p.add_argument("--port", type=argtypes.port, help="Client port (default: a free one)")
    p.add_argument("--data-dir", help="Data directory (default: a private temporary one)")
    p.add_argument(
        "--heap-mb",
        type=int,
        help="Java heap, MiB (default: LOADMGR_ZK_HEAP_MB, 1024: enough for 100,000 bundles)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from service.settings import Settings
    from service.zookeeper.launcher import EmbeddedZooKeeper

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
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
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
