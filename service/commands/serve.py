"""``loadmgr serve``: one load-manager instance (leader candidate) with its REST API and metrics.

Every instance serves the API; the runtime decides who leads. On SIGINT/SIGTERM uvicorn stops
accepting requests and returns; then the runtime resigns (deleting its leader node), closes
ZooKeeper, and the history writer flushes; the exit code is 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from typing import Any

from service.commands import argtypes
from service.settings import Settings


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="Run a load-manager instance with the REST API and /metrics")
    p.add_argument("--zk", type=argtypes.zk_hosts, help="ZooKeeper connection string (LOADMGR_ZK_HOSTS)")
    p.add_argument("--host", help="REST bind address (LOADMGR_HTTP_HOST)")
    p.add_argument("--port", type=argtypes.port, help="REST port (LOADMGR_HTTP_PORT)")
    p.add_argument("--token", help="Bearer token for mutations (LOADMGR_API_TOKEN)")
    p.add_argument(
        "--broker-conf",
        type=argtypes.readable_text_file,
        help="A Pulsar broker.conf to read load-balancer keys from",
    )
    p.add_argument("--no-history", action="store_true", help="Do not append Parquet history")
    p.add_argument(
        "--cluster",
        default=os.environ.get("LOADMGR_CLUSTER", "standalone"),
        help="Value of the `cluster` label on metrics (LOADMGR_CLUSTER)",
    )
    p.set_defaults(func=_serve)


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for attr, key in (
        ("zk", "zk_hosts"),
        ("host", "http_host"),
        ("port", "http_port"),
        ("token", "api_token"),
        ("broker_conf", "broker_conf"),
    ):
        value = getattr(args, attr, None)
        if value is not None:
            overrides[key] = value
    if getattr(args, "no_history", False):
        overrides["history_enabled"] = False
    return Settings(**overrides)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.api import create_app
    from service.api.metrics import PrometheusMetrics
    from service.leader.service import LoadManagerService

    settings = settings_from_args(args)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = settings.load_balancer_config(dict(os.environ))
    metrics = PrometheusMetrics(cluster=args.cluster)
    history = None
    if settings.history_enabled:
        from service.longterm.history import HistorySink

        history = HistorySink(settings.history_uri)
    service = LoadManagerService(settings, config, metrics=metrics, history=history)
    service.start()
    try:
        app = create_app(service, settings, metrics.registry)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=settings.http_host,
                port=settings.http_port,
                log_level="warning",
                lifespan="off",
                access_log=False,
            )
        )
        print(f"loadmgr serving http://{settings.http_host}:{settings.http_port} (docs at /docs)", flush=True)
        # uvicorn handles SIGINT/SIGTERM while serving and then re-raises the signal to the handler it
        # found; a handler that only records it lets the runtime below resign and close cleanly.
        received: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, _frame: received.append(signum))
        server.run()
    finally:
        service.stop()
        if history is not None:
            history.close()
    return 0
