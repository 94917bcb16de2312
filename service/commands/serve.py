"""``loadmgr serve``: one load-manager instance (leader candidate) with its REST API and metrics.

Every instance serves the API; the runtime decides who leads. On SIGINT/SIGTERM uvicorn stops
accepting requests and returns; then the runtime resigns (deleting its leader node), closes
ZooKeeper, and the history writer flushes; the exit code is 0.

Tokens come from the environment or a file, never from argv (which ``ps`` shows to every user).
Without an admin token the API is open: that is allowed on a loopback address (with a loud
warning) and anywhere else only with ``--insecure``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

from pydantic import ValidationError

from balancer.errors import ConfigError
from service.commands import argtypes
from service.commands.endpoints import register_serving
from service.commands.serve_checks import check_before_start
from service.commands.serve_history import check_history_owner, history_location
from service.settings import Settings

SWITCH_INTERVAL_S = 0.001


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="Run a load-manager instance with the REST API and /metrics")
    p.add_argument("--zk", type=argtypes.zk_hosts, help="ZooKeeper connection string (LOADMGR_ZK_HOSTS)")
    p.add_argument("--host", help="REST bind address (LOADMGR_HTTP_HOST)")
    p.add_argument("--port", type=argtypes.port_or_zero, help="REST port, 0: any (LOADMGR_HTTP_PORT)")
    p.add_argument("--token", help=argparse.SUPPRESS)  # refused with a pointer to the safe ways
    p.add_argument("--token-file", help="File with the admin token (LOADMGR_API_TOKEN_FILE)")
    p.add_argument("--read-token-file", help="File with the read-only token (LOADMGR_API_READ_TOKEN_FILE)")
    p.add_argument("--tls-cert", help="PEM certificate: serve HTTPS (LOADMGR_HTTP_TLS_CERTFILE)")
    p.add_argument("--tls-key", help="PEM key of --tls-cert (LOADMGR_HTTP_TLS_KEYFILE)")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="Serve without an admin token on a non-loopback address (LOADMGR_INSECURE); never in production",
    )
    p.add_argument(
        "--broker-conf",
        type=argtypes.readable_text_file,
        help="A Pulsar broker.conf to read load-balancer keys from",
    )
    p.add_argument("--no-history", action="store_true", help="Do not append Parquet history")
    p.add_argument(
        "--session-timeout",
        type=argtypes.positive_float,
        help="ZooKeeper session timeout in seconds: how long a dead leader keeps its node before a "
        "follower takes over (LOADMGR_ZK_SESSION_TIMEOUT_S, default 10)",
    )
    p.add_argument(
        "--cluster",
        help="Pulsar's clusterName: whose isolation policies and failure domains apply, and the "
        "metrics' cluster label (LOADMGR_CLUSTER; default: the only cluster in ZooKeeper)",
    )
    g = p.add_argument_group(
        "Pulsar mode", "decide for a real Pulsar cluster's brokers (docs/pulsar-mode.md)"
    )
    g.add_argument(
        "--mode",
        choices=("zookeeper", "pulsar"),
        help="zookeeper: loadmgr's agents own bundles (default); pulsar: Pulsar's brokers do, loadmgr "
        "unloads and splits through their admin API (LOADMGR_MODE)",
    )
    g.add_argument(
        "--pulsar-admin-url",
        help="The brokers' web service URL(s), e.g. http://b1:8080,b2:8080 (LOADMGR_PULSAR_ADMIN_URL)",
    )
    g.add_argument(
        "--pulsar-token-file",
        type=argtypes.readable_text_file,
        help="File with the token for Pulsar's admin API (LOADMGR_PULSAR_ADMIN_TOKEN_FILE)",
    )
    g.add_argument(
        "--pulsar-tls-trust-certs", type=argtypes.readable_text_file, help="CA of the brokers' HTTPS"
    )
    g.add_argument("--pulsar-tls-cert", type=argtypes.readable_text_file, help="Client certificate (mTLS)")
    g.add_argument(
        "--pulsar-tls-key", type=argtypes.readable_text_file, help="Client key of --pulsar-tls-cert"
    )
    g.add_argument(
        "--beside-brokers",
        action="store_true",
        help="Run beside the brokers' own shedding/auto-split in dry-run instead of refusing "
        "(LOADMGR_PULSAR_BESIDE_BROKERS)",
    )
    g.add_argument(
        "--configuration-store",
        type=argtypes.zk_hosts,
        help="Pulsar's configuration store when it is another ZooKeeper (LOADMGR_CONFIGURATION_STORE)",
    )
    p.set_defaults(func=_serve)


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    flags: dict[str, str] = {}
    for attr, key in (
        ("zk", "zk_hosts"),
        ("host", "http_host"),
        ("port", "http_port"),
        ("token_file", "api_token_file"),
        ("read_token_file", "api_read_token_file"),
        ("tls_cert", "http_tls_certfile"),
        ("tls_key", "http_tls_keyfile"),
        ("broker_conf", "broker_conf"),
        ("session_timeout", "zk_session_timeout_s"),
        ("cluster", "cluster"),
        ("mode", "mode"),
        ("pulsar_admin_url", "pulsar_admin_url"),
        ("pulsar_token_file", "pulsar_admin_token_file"),
        ("pulsar_tls_trust_certs", "pulsar_tls_trust_certs"),
        ("pulsar_tls_cert", "pulsar_tls_certfile"),
        ("pulsar_tls_key", "pulsar_tls_keyfile"),
        ("configuration_store", "configuration_store"),
    ):
        value = getattr(args, attr, None)
        if value is not None:
            overrides[key] = value
            flags[key] = "--" + attr.replace("_", "-")
    if getattr(args, "no_history", False):
        overrides["history_enabled"] = False
    if getattr(args, "insecure", False):
        overrides["insecure"] = True
    if getattr(args, "beside_brokers", False):
        overrides["pulsar_beside_brokers"] = True
    if getattr(args, "token", None) is not None:
        raise ConfigError(
            "--token", "<hidden>", "argv is visible in ps: use LOADMGR_API_TOKEN or --token-file instead"
        )
    try:
        return Settings(**overrides)
    except ValidationError as e:
        err = e.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else ""
        if key not in flags:
            raise  # an environment value: the CLI names its LOADMGR_ variable
        raise ConfigError(flags[key], overrides[key], str(err.get("msg", "invalid"))) from None


MIN_TOKEN_CHARS = 16


def check_exposure(settings: Settings) -> str | None:
    """Refuse (ConfigError) or warn about serving without an admin token; returns the warning."""
    from service.api.guard import is_loopback  # here: FastAPI is slow to import for other commands

    if (settings.http_tls_certfile is None) != (settings.http_tls_keyfile is None):
        raise ConfigError("http_tls_keyfile", str(settings.http_tls_keyfile), "HTTPS needs both cert and key")
    admin = settings.admin_token()
    if admin is not None:
        read = settings.read_token()  # an unreadable read-token file is an error at start, not per request
        if read is not None and read == admin:
            # the same secret cannot tell the two roles apart: every reader would be admin
            raise ConfigError("api_read_token", "<hidden>", "the read token must differ from the admin token")
        if len(admin) < MIN_TOKEN_CHARS:
            return (
                f"WARNING: the admin token has {len(admin)} characters; use at least {MIN_TOKEN_CHARS} "
                "random ones (e.g. openssl rand -hex 24): it also keys the leader node's signature"
            )
        return None
    if not is_loopback(settings.http_host) and not settings.insecure:
        raise ConfigError(
            "http_host",
            settings.http_host,
            "no admin token is configured (LOADMGR_API_TOKEN or LOADMGR_API_TOKEN_FILE): refusing to "
            "serve an open API beyond loopback; pass --insecure to do it anyway",
        )
    return (
        f"WARNING: no admin token configured: anyone who reaches {settings.service_url()} can unload, "
        "split and reconfigure. Set LOADMGR_API_TOKEN_FILE (or LOADMGR_API_TOKEN)."
    )


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.api import create_app
    from service.api.metrics import PrometheusMetrics
    from service.leader.service import LoadManagerService

    settings = settings_from_args(args)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per admin call is noise
    warning = check_exposure(settings)
    # A broker.conf Java would refuse fails here, in one line, before anything else is said or started:
    # a local file's mistake is named before any remote is probed.
    config = settings.load_balancer_config(dict(os.environ))
    check_before_start(settings)  # before the election: an address or certificate that cannot serve
    if warning is not None:
        # printed, not logged: it must show whatever the log level
        print(warning, file=sys.stderr, flush=True)
    metrics = PrometheusMetrics(
        cluster=settings.cluster or "standalone", expose_bundles=config.exposeBundlesMetricsInPrometheus
    )
    history = None
    history_uri, cluster = history_location(settings)  # Pulsar mode: a directory named by the cluster
    if settings.history_enabled:
        try:
            from service.longterm.history import HistorySink
        except ImportError as e:
            # The history extra is optional (the Spark-free server image carries it; a bare pip
            # install may not): say how to get it or turn history off, never a traceback.
            print(
                f"loadmgr: history is enabled but {e.name or 'pyarrow'} is not installed: "
                "pip install 'loadmgr[history]', or run with --no-history (LOADMGR_HISTORY_ENABLED=false)",
                file=sys.stderr,
            )
            return 2
        check_history_owner(history_uri, cluster)
        history = HistorySink(history_uri)  # writes nothing until the leader's first cycle
    # REST and the watches wait on I/O while a cycle's thread computes; each wake-up then waits for the
    # interpreter lock up to the switch interval (5 ms by default), many times per request. 1 ms keeps
    # an operator's request from queueing behind a 30,000-move cycle (bench/live_scale.py).
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    service = LoadManagerService(settings, config, metrics=metrics, history=history)
    metrics.watch(service)
    try:
        service.start()  # ModeMismatch (exit 2, one line) before anything is written
    except Exception:
        if history is not None:
            history.close()
        raise
    try:
        if history is not None:
            from service.longterm.history_meta import write_meta

            # Only once the mode check passed: a refused start leaves no history directory behind,
            # nor overwrites the config another run recorded. The first cycle comes later anyway: it
            # waits for leadership and the first full sync.
            write_meta(history_uri, config, cluster)  # what loadmgr replay assumes the leader ran
        app = create_app(service, settings, metrics.registry)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=settings.http_host,
                port=settings.http_port,
                log_level="warning",
                lifespan="off",
                access_log=False,
                ssl_certfile=settings.http_tls_certfile,
                ssl_keyfile=settings.http_tls_keyfile,
            )
        )
        where = f"{settings.http_scheme}://{settings.http_host}:{settings.http_port}"
        mode = (
            f"Pulsar mode, brokers at {settings.pulsar_admin_url}"
            if settings.pulsar_mode
            else "ZooKeeper-native mode"
        )
        print(f"loadmgr serving {where} (docs at /docs; {mode})", flush=True)
        # uvicorn handles SIGINT/SIGTERM while serving and then re-raises the signal to the handler it
        # found; a handler that only records it lets the runtime below resign and close cleanly.
        received: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, _frame: received.append(signum))
        register_serving(settings, history_uri if history is not None else None, cluster)
        server.run()
    finally:
        service.stop()
        if history is not None:
            history.close()
    return 0
