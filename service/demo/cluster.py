"""``loadmgr demo``: a whole cluster in one process, starting skewed and balancing itself.

An embedded ZooKeeper, one load-manager leader serving REST and /metrics, and several simulated
broker agents. Every bundle is first placed on the first broker (the only one alive when the
namespace is created); then the other brokers join and the leader's shedding cycles, every few
seconds, move bundles until the brokers' loads are even. A terminal shows a live view (the broker
table redrawn in place, the last moves with their reasons, the CPU spread and its sparkline); a log
file or a pipe gets plain lines: the table every 10 s and every decision with its reason.

This module is the lifecycle (start, agents, the living demo's churn, stop); what a demo is made of
is :mod:`service.demo.options`, and watching it (balance, tables, output) :mod:`service.demo.watch`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from service.api.metrics import PrometheusMetrics
from service.demo.options import (
    NAMESPACE,
    TENANTS,
    DemoOptions,
    cli_hint,
    demo_config,
    free_port,
)
from service.demo.watch import DemoWatch, decision_line
from service.settings import Settings

# Where other modules and the tests have always found these.
__all__ = [
    "NAMESPACE",
    "TENANTS",
    "Demo",
    "DemoOptions",
    "cli_hint",
    "decision_line",
    "demo_config",
    "free_port",
]


class Demo(DemoWatch):
    """Start with :meth:`start`, watch with :meth:`run`, always finish with :meth:`stop`."""

    def __init__(self, opts: DemoOptions | None = None, out: TextIO | None = None) -> None:
        self.opts = opts or DemoOptions()
        self.out = out or sys.stdout
        self.url = ""
        self.service: Any = None
        self.metrics = PrometheusMetrics(cluster="demo")
        self.agents: list[Any] = []
        self.broker_ids = [f"broker-{i + 1}:{8081 + i}" for i in range(self.opts.brokers)]
        self.started_at = 0.0
        self.skewed_at_start: dict[str, int] = {}
        self.balanced_after_s: float | None = None
        self._zk: Any = None
        self._server: Any = None
        self._server_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._seen_decision = 0
        self._say_live: Callable[[str], None] | None = None
        self.namespaces = {NAMESPACE: self.opts.bundles, **(TENANTS if self.opts.living else {})}
        self.scenario: Any = None
        self.away: str | None = None  # the broker that left (living demo)
        self._churns = 0

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        from service.leader.service import LoadManagerService
        from service.zookeeper.server.launcher import EmbeddedZooKeeper

        self._say("starting ZooKeeper ...")
        self._zk = EmbeddedZooKeeper()
        self._zk.start()
        port = free_port(self.opts.port)
        settings = Settings(
            zk_hosts=self._zk.hosts,
            http_host="127.0.0.1",
            http_port=port,
            instance_id=f"leader-{port}",
            api_token=self.opts.token,
            api_reads_open=True,  # the demo shows its state to whoever runs it; mutations keep the token
            history_enabled=False,
            zk_session_timeout_s=6.0,
        )
        config = demo_config(self.opts)
        history = None
        if self.opts.history:
            from service.longterm.history import HistorySink
            from service.longterm.history_meta import write_meta

            history = HistorySink(self.opts.history)
            write_meta(self.opts.history, config, "demo")
            self._say(f"recording load history to {self.opts.history}")
        self.service = LoadManagerService(
            settings, config, metrics=self.metrics, history=history, seed=self.opts.seed
        )
        self.metrics.watch(self.service)
        self.service.start()
        if not self.service.wait_until(self.service.is_leader, 20):
            raise RuntimeError("the demo's load manager did not become leader")
        self._start_http(settings)
        self._say(
            f"load manager leading; REST API at {self.url} (docs {self.url}/docs, metrics {self.url}/metrics)"
        )
        self._say(f"ZooKeeper at {self._zk.hosts} (no auth: loopback only, this demo's own)")
        if self.opts.publish_state:
            self._publish_state()
        self.scenario = self._scenario()
        for ns, count in self.namespaces.items():
            self.service.create_namespace(ns, count)
        total = sum(self.namespaces.values())
        self._start_agent(self.broker_ids[0])
        self.service.wait_until(lambda: self._owned_count(self.broker_ids[0]) == total, 30)
        self.skewed_at_start = self.ownership_counts()
        self._say(
            f"all {total} bundles of {', '.join(self.namespaces)} start on {self.broker_ids[0]}; "
            f"starting {len(self.broker_ids) - 1} more brokers"
        )
        if self.opts.living:
            self._say(
                f"the load lives: a {self.opts.day_s / 60:.0f}-minute day (each tenant peaks at its own "
                f"time), tenant bursts every few minutes, a broker leaving for "
                f"{self.opts.churn_down_s:.0f} s every {self.opts.churn_period_s / 60:.0f} minutes"
            )
        for broker in self.broker_ids[1:]:
            self._start_agent(broker)
        self.started_at = time.monotonic()

    def _publish_state(self) -> None:
        """Records the addresses where every CLI verb looks (:mod:`service.demo.state`) and says what
        to type in a second terminal."""
        import os
        import shutil

        from service.demo.state import DemoState, write_state

        history = os.path.abspath(self.opts.history) if self.opts.history else None
        written = write_state(DemoState(os.getpid(), self.url, self._zk.hosts, history, os.getcwd()))
        self._state_written = written is not None
        where = f"recorded in {written}" if written else "not recorded (state file not writable)"
        self._say(f"addresses {where}: every loadmgr verb finds this demo without --url/--zk")
        self._say(f"in a second terminal: {cli_hint(shutil.which('loadmgr'), sys.argv[0])} status")

    def stop(self) -> None:
        self._stop.set()
        if getattr(self, "_state_written", False):
            import os

            from service.demo.state import remove_state

            remove_state(os.getpid())
        if self._server is not None:
            self._server.should_exit = True
        if self._server_thread is not None:
            self._server_thread.join(timeout=10)
        for agent in self.agents:
            with contextlib.suppress(Exception):
                agent.stop(release=False)
            with contextlib.suppress(Exception):
                agent.store.stop()
        self.agents.clear()
        if self.service is not None:
            with contextlib.suppress(Exception):
                self.service.stop()
        if self._zk is not None:
            self._zk.stop()
            self._zk = None
        self._say("demo stopped: HTTP server, agents, load manager and ZooKeeper are down")

    def _start_http(self, settings: Settings) -> None:
        import uvicorn

        from service.api import create_app

        app = create_app(self.service, settings, self.metrics.registry)
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=settings.http_host,
                port=settings.http_port,
                log_level="warning",
                lifespan="off",
                access_log=False,
            )
        )
        self._server_thread = threading.Thread(target=self._server.run, name="demo-http", daemon=True)
        self._server_thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self._server.started:
            raise RuntimeError("the demo's HTTP server did not start")
        self.url = f"http://{settings.http_host}:{settings.http_port}"

    def _start_agent(self, broker_id: str) -> None:
        from service.broker.agent import BrokerAgent, SimulatedSource
        from service.zookeeper.metadata.store import ZkStore

        scenario = self.scenario
        store = ZkStore(self._zk.hosts, "", 6.0)
        store.start()
        agent = BrokerAgent(
            store,
            broker_id,
            self.service.config,
            SimulatedSource(lambda: scenario),
            ownership_poll_s=0.5,
            report_interval_s=1.0,
        )
        agent.start()
        self.agents.append(agent)

    def _scenario(self) -> Any:
        from service.broker.workload import living_scenario, skewed_scenario

        if not self.opts.living:
            return skewed_scenario(
                NAMESPACE, self.opts.bundles, self.opts.seed, msg_rate=self.opts.msg_rate_per_bundle
            )
        return living_scenario(
            self.namespaces,
            self.opts.seed,
            msg_rate=self.opts.msg_rate_per_bundle,
            period_s=self.opts.day_s,
            start_ms=int(time.time() * 1000),
        )

    def churn(self, now: float | None = None) -> str | None:
        """Living demo: one broker (a different one each time) leaves for ``churn_down_s`` every
        ``churn_period_s``, first 4 minutes in; what happened, or None. Called from the watch loop."""
        if not self.opts.living or self.started_at == 0.0 or len(self.broker_ids) < 3:
            return None
        t = (now if now is not None else time.monotonic()) - self.started_at - 240.0
        if t < 0:
            return None
        in_period = t % self.opts.churn_period_s
        if self.away is None and in_period < self.opts.churn_down_s:
            # never the first broker: the demo's story starts from it
            broker = self.broker_ids[1 + self._churns % (len(self.broker_ids) - 1)]
            self._churns += 1
            self._stop_agent(broker)
            self.away = broker
            return f"{broker} leaves (its bundles are orphans; the leader places them elsewhere)"
        if self.away is not None and in_period >= self.opts.churn_down_s:
            broker, self.away = self.away, None
            self._start_agent(broker)
            return f"{broker} returns (empty; shedding fills it again)"
        return None

    def _stop_agent(self, broker: str) -> None:
        for agent in [a for a in self.agents if a.broker_id == broker]:
            with contextlib.suppress(Exception):
                agent.stop(release=False)
            with contextlib.suppress(Exception):
                agent.store.stop()
            self.agents.remove(agent)

    @property
    def zk_hosts(self) -> str:
        """The embedded ZooKeeper's connection string ("" before start or after stop)."""
        return str(self._zk.hosts) if self._zk is not None else ""
