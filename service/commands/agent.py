"""``loadmgr agent``: run a broker agent (simulated broker, or a reporter next to a real Pulsar broker)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from balancer.errors import InvalidInput
from service.broker.agent import BrokerAgent, SimulatedSource, StatsSource
from service.broker.pulsar_source import PulsarBrokerSource
from service.broker.workload import Scenario
from service.commands import argtypes, endpoints
from service.settings import Settings, secret
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.security import ZkSecurity


def register(sub: Any) -> None:
    p = sub.add_parser("agent", help="Run a broker agent: register, own bundles, publish load reports")
    p.add_argument(
        "--broker-id",
        required=True,
        type=argtypes.broker_id,
        help="This broker's id, host:port (its web service address)",
    )
    p.add_argument(
        "--zk",
        default=None,
        type=argtypes.zk_hosts,
        help="ZooKeeper connection string (default LOADMGR_ZK_HOSTS, else a running demo's)",
    )
    p.add_argument(
        "--chroot", default=None, type=argtypes.chroot, help="ZooKeeper chroot (default LOADMGR_ZK_CHROOT)"
    )
    p.add_argument(
        "--session-timeout",
        type=argtypes.positive_float,
        default=None,
        help="ZooKeeper session timeout, seconds",
    )
    p.add_argument("--source", choices=("simulated", "pulsar"), default="simulated")
    p.add_argument(
        "--workload", type=Path, help="Scenario JSON; published to /loadmgr/workload for all agents"
    )
    p.add_argument(
        "--pulsar-url", help="The broker's web service URL (pulsar source); default http://<broker-id>"
    )
    p.add_argument(
        "--native-url",
        help="The broker's binary protocol URL (brokerServiceUrl); default pulsar://<host>:6650",
    )
    p.add_argument(
        "--pulsar-token",
        default=os.environ.get("LOADMGR_PULSAR_TOKEN"),
        help="Pulsar admin API token (prefer LOADMGR_PULSAR_TOKEN or --pulsar-token-file: argv shows in ps)",
    )
    p.add_argument(
        "--pulsar-token-file",
        type=Path,
        default=os.environ.get("LOADMGR_PULSAR_TOKEN_FILE"),
        help="File holding the Pulsar admin API token (LOADMGR_PULSAR_TOKEN_FILE)",
    )
    p.add_argument(
        "--report-interval",
        type=argtypes.positive_float,
        help="Seconds between report checks (default from config)",
    )
    p.add_argument(
        "--ownership-poll",
        type=argtypes.positive_float,
        default=1.0,
        help="Longest idle wait of the agent's loop in seconds (ownership follows ZooKeeper watches at once; "
        "an idle loop sends no ownership request)",
    )
    p.add_argument(
        "--broker-conf",
        type=argtypes.readable_text_file,
        help="A Pulsar broker.conf to read load-balancer keys from",
    )
    p.set_defaults(func=run)


def build_agent(args: argparse.Namespace, settings: Settings) -> BrokerAgent:
    config = settings.load_balancer_config(dict(os.environ))
    store = ZkStore(
        endpoints.zk_hosts(args.zk) or settings.zk_hosts,  # --zk, LOADMGR_ZK_HOSTS, a running demo
        settings.zk_chroot if args.chroot is None else args.chroot,
        args.session_timeout or settings.zk_session_timeout_s,
        security=ZkSecurity.from_settings(settings),
    )
    store.start()
    source: StatsSource
    if args.source == "pulsar":
        token = secret(args.pulsar_token, args.pulsar_token_file, "--pulsar-token-file")
        source = PulsarBrokerSource(args.pulsar_url or f"http://{args.broker_id}", token=token)
    else:
        if args.workload is not None:
            try:
                scenario = Scenario.parse(json.loads(args.workload.read_text()))
            except (OSError, json.JSONDecodeError) as e:
                raise InvalidInput("--workload", str(args.workload), str(e)) from None
            store.write_workload(scenario.model_dump(mode="json"))
            for ns, n in scenario.namespaces.items():
                store.create_namespace(ns, n)
        source = SimulatedSource(lambda: _read_scenario(store))
    return BrokerAgent(
        store,
        args.broker_id,
        config,
        source,
        web_url=args.pulsar_url,
        native_url=args.native_url,
        ownership_poll_s=args.ownership_poll,
        report_interval_s=args.report_interval,
    )


def _read_scenario(store: ZkStore) -> Scenario | None:
    return store.read_workload_as(Scenario.parse)


def run(args: argparse.Namespace) -> int:
    settings = Settings() if args.broker_conf is None else Settings(broker_conf=args.broker_conf)
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    agent = build_agent(args, settings)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    agent.start()
    done.wait()
    agent.stop()
    agent.store.stop()
    return 0
