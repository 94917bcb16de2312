"""``loadmgr zookeeper``: a real standalone ZooKeeper in the foreground, for local clusters and demos."""

from __future__ import annotations

import argparse
import inspect
import signal
import threading
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("zookeeper", help="Run an embedded ZooKeeper until Ctrl-C")
    p.add_argument("--port", type=int, help="Client port (default: a free one)")
    p.add_argument("--data-dir", help="Data directory (default: a private temporary one)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from service.zk_launcher import EmbeddedZooKeeper

    params = inspect.signature(EmbeddedZooKeeper).parameters
    kwargs: dict[str, Any] = {}
    for opt, name in ((args.port, "port"), (args.data_dir, "data_dir")):
        if opt is None:
            continue
        if name not in params:
            print(f"loadmgr: --{name.replace('_', '-')} is not supported by this ZooKeeper launcher")
            return 2
        kwargs[name] = opt
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with EmbeddedZooKeeper(**kwargs) as zk:
        print(f"ZooKeeper serving at {zk.hosts} (pid {zk.pid}); Ctrl-C to stop", flush=True)
        print(f"  export LOADMGR_ZK_HOSTS={zk.hosts}", flush=True)
        while not stop.wait(0.5):
            if not zk.running:
                print("loadmgr: ZooKeeper exited unexpectedly")
                return 1
    print("ZooKeeper stopped", flush=True)
    return 0
