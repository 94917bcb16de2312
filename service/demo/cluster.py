"""``loadmgr demo``: a whole cluster in one process, starting skewed and balancing itself.

An embedded ZooKeeper, one load-manager leader serving REST and /metrics, and several simulated
broker agents. Every bundle is first placed on the first broker (the only one alive when the
namespace is created); then the other brokers join and the leader's shedding cycles, every few
seconds, move bundles until the brokers' loads are even. A terminal shows a live view (the broker
table redrawn in place, the last moves with their reasons, the CPU spread and its sparkline); a log
file or a pipe gets plain lines: the table every 10 s and every decision with its reason.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from balancer.config import LoadBalancerConfig
from service.api.metrics import PrometheusMetrics
from service.settings import Settings

NAMESPACE = "public/default"


@dataclass
class DemoOptions:
    brokers: int = 4
    bundles: int = 16
    port: int = 8080
    shed_interval_s: float = 5.0
    seed: int = 7
    token: str | None = None
    strategy: str = "BalancedShedder"
    placement: str = "LeastResourceUsageWithWeight"
    msg_rate_per_bundle: float = 4000.0
    # "balanced": the busiest broker's CPU is within this many percentage points of the idlest
    balanced_cpu_spread: float = 15.0
    # where the leader appends its cycles as Parquet (what ``loadmgr replay`` reads); None records nothing
    history: str | None = None
    # A load that lives (``loadmgr demo`` without --steady): two more tenants, a diurnal wave of
    # ``day_s`` seconds with each tenant peaking at its own time, seeded tenant bursts, and one broker
    # leaving for ``churn_down_s`` seconds every ``churn_period_s`` (the first time after 4 minutes).
    living: bool = False
    # Record the addresses in the state file every CLI verb reads (off for a second demo in one process)
    publish_state: bool = True
    day_s: float = 600.0
    churn_period_s: float = 600.0
    churn_down_s: float = 120.0


# The tenants a living demo adds beside public/default, with their bundle counts.
TENANTS = {"acme/orders": 4, "globex/events": 4}


def free_port(preferred: int) -> int:
    """``preferred`` if it can be bound on loopback, else any free port (0 always means any)."""
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError("no free port")


def cli_hint(on_path: str | None, argv0: str) -> str:
    """What a user types in another terminal to reach this demo: ``loadmgr`` when that is on PATH,
    else the full path of the command that started the demo."""
    import os

    if on_path:
        return "loadmgr"
    here = os.path.abspath(argv0) if argv0 and os.path.basename(argv0) == "loadmgr" else None
    return here or "python -m service.commands.cli"


def decision_line(
    kind: str, bundle: str | None, source: str | None, destination: str | None, e: dict[str, Any]
) -> str:
    """One decision as the demo prints it: a move names both sides (never Python's None), a split its
    children, a decision about no bundle (a config update) only its reason and message."""
    why = f"[{e.get('reason', '')}] {e.get('message', '')}"
    if not bundle:
        return f"{kind}: {why}"
    nums = e.get("numbers") or {}
    if e.get("reason") in ("manual_split",) or kind == "split":
        children = ", ".join(str(c) for c in nums.get("children") or [])
        where = f" on {source}" if source else ""
        return f"{kind}: split {bundle}{where}" + (f" into {children}" if children else "") + f"  {why}"
    move = (
        f" {source or '(unowned)'} -> {destination or '(placement decides)'}" if source or destination else ""
    )
    return f"{kind}: {bundle}{move}  {why}"


def demo_config(opts: DemoOptions) -> LoadBalancerConfig:
    """Pulsar's defaults with the clock sped up so a demo converges in about a minute."""
    return LoadBalancerConfig.from_dict(
        {
            "loadBalancerLoadSheddingStrategy": opts.strategy,
            "loadBalancerLoadPlacementStrategy": opts.placement,
            "loadBalancerSheddingIntervalMinutes": opts.shed_interval_s / 60,
            "loadBalancerSheddingGracePeriodMinutes": 0.5,
            "loadBalancerResourceQuotaUpdateIntervalMinutes": 0.25,
            "loadBalancerReportUpdateMinIntervalMillis": 1000,
            # a report at least every 30 s (Pulsar: 15 minutes), the demo's clock being sped up
            "loadBalancerReportUpdateMaxIntervalMinutes": 0.5,
            "loadBalancerHistoryResourcePercentage": 0.5,
            "loadBalancerAutoBundleSplitEnabled": False,
            # the simulated brokers move a few MB/s, far below Pulsar's 10 MB/s floor for shedding
            "loadBalancerBundleUnloadMinThroughputThreshold": 1.0,
            # Pulsar's 180 s on the demo's clock (its grace period is 60 times shorter than Pulsar's)
            "loadBalanceSheddingDelayInSeconds": 3,
        }
    )


class Demo:
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
            write_meta(self.opts.history, config)
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
        written = write_state(DemoState(os.getpid(), self.url, self._zk.hosts, history))
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

    # ---- watching -------------------------------------------------------------------------------
    def ownership_counts(self) -> dict[str, int]:
        view = self.service.view()
        counts = dict.fromkeys(self.broker_ids, 0)
        for owner in view.owners.values():
            counts[owner] = counts.get(owner, 0) + 1
        return counts

    def _owned_count(self, broker: str) -> int:
        return self.ownership_counts().get(broker, 0)

    def present(self) -> list[str]:
        """The brokers that should be up (all but the one a living demo sent away)."""
        return [b for b in self.broker_ids if b != self.away]

    def cpu_spread(self) -> float | None:
        brokers = self.service.view().brokers
        present = [brokers[b] for b in self.present() if b in brokers]
        if len(present) < len(self.present()):
            return None
        cpus = [float(d.cpu.percent_usage()) for d in present]
        return max(cpus) - min(cpus)

    def is_balanced(self) -> bool:
        spread = self.cpu_spread()
        counts = self.ownership_counts()
        return (
            spread is not None
            and spread <= self.opts.balanced_cpu_spread
            and min(counts.get(b, 0) for b in self.present()) > 0
        )

    def wait_balanced(self, timeout_s: float) -> bool:
        ok = bool(self.service.wait_until(self.is_balanced, timeout_s))
        if ok and self.balanced_after_s is None:
            self.balanced_after_s = time.monotonic() - self.started_at
        return ok

    def table(self) -> str:
        view = self.service.view()
        counts = self.ownership_counts()
        lines = [f"{'broker':<14} {'cpu%':>6} {'nic-in%':>8} {'msg/s':>9} {'MB/s':>7} {'bundles':>7}"]
        for broker in self.broker_ids:
            d = view.brokers.get(broker)
            if d is None:
                lines.append(f"{broker:<14} {'(down)':>6}")
                continue
            lines.append(
                f"{broker:<14} {d.cpu.percent_usage():6.1f} {d.bandwidth_in.percent_usage():8.1f} "
                f"{d.msg_rate_in + d.msg_rate_out:9.0f} {d.msg_throughput / 1e6:7.2f} "
                f"{counts.get(broker, 0):7d}"
            )
        spread = self.cpu_spread()
        state = "balanced" if self.is_balanced() else "skewed"
        lines.append(
            f"cpu spread {spread:.1f} points -> {state}" if spread is not None else "waiting for reports"
        )
        return "\n".join(lines)

    def new_decisions(self) -> list[str]:
        fresh = [d for d in reversed(self.service.decisions(limit=200)) if d.id > self._seen_decision]
        if fresh:
            self._seen_decision = fresh[-1].id
        # A shedding move is logged when planned; it goes when the disruption budget lets it (issue 46).
        return [
            decision_line(
                f"{d.kind} (planned)" if d.state == "planned" else d.kind,
                d.bundle,
                d.source,
                d.destination,
                d.explanation,
            )
            for d in fresh
        ]

    def run(self, duration_s: float | None = None, refresh_s: float | None = None) -> None:
        """Watch until ``duration_s`` elapses or :meth:`stop`/Ctrl-C: a live view redrawn in place on a
        terminal, plain timestamped lines (the table, then each decision) anywhere else."""
        end = None if duration_s is None else time.monotonic() + duration_s
        if self.out.isatty():
            self._run_live(end)
            return
        refresh_s = 10.0 if refresh_s is None else refresh_s
        next_table = 0.0
        while not self._stop.is_set() and (end is None or time.monotonic() < end):
            for line in self.new_decisions():
                self._say(line)
            self._check_balanced()
            event = self.churn()
            if event:
                self._say(event)
            if time.monotonic() >= next_table:
                self._say("\n" + self.table())
                next_table = time.monotonic() + refresh_s
            self._stop.wait(0.5)

    def _run_live(self, end: float | None) -> None:
        from rich.console import Console
        from rich.live import Live

        from service.demo.live import LiveView

        view = LiveView(self)
        console = Console(file=self.out)
        # Messages go above the view through the console: a print to the terminal would tear it.
        self._say_live = lambda text: view.note(text)
        try:
            with Live(view.render(), console=console, refresh_per_second=4, redirect_stderr=False) as live:
                while not self._stop.is_set() and (end is None or time.monotonic() < end):
                    view.poll()
                    self._check_balanced()
                    event = self.churn()
                    if event:
                        view.note(event)
                    live.update(view.render())
                    self._stop.wait(0.5)
        finally:
            self._say_live = None

    def _check_balanced(self) -> None:
        if self.balanced_after_s is None and self.is_balanced():
            self.balanced_after_s = time.monotonic() - self.started_at
            self._say(f"*** balanced after {self.balanced_after_s:.0f} s ***")

    def _say(self, text: str) -> None:
        if self._say_live is not None:
            self._say_live(text.strip())
            return
        stamp = time.strftime("%H:%M:%S")
        print(text if text.startswith("\n") else f"{stamp} {text}", file=self.out, flush=True)
