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
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from service.zookeeper.launcher import EmbeddedZooKeeper

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedZooKeeper(port=args.port, data_dir=args.data_dir) as zk:
        print(f"ZooKeeper serving at {zk.hosts} (pid {zk.pid}); Ctrl-C to stop", flush=True)
        print(f"  export LOADMGR_ZK_HOSTS={zk.hosts}", flush=True)
        while not stop.wait(0.5):
            if not zk.running:
                print("loadmgr: ZooKeeper exited unexpectedly")
                return 1
    print("ZooKeeper stopped", flush=True)
    return 0
