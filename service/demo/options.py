"""What a demo is made of: its options, the namespaces it creates, the sped-up load-balancer config it
runs with, and the small helpers its banner uses (a free port, what to type in a second terminal)."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from balancer.config import LoadBalancerConfig

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
            # and 15 s between two unloads at one broker on the demo's clock
            "loadBalancerUnloadSpacingSeconds": 0.25,
        }
    )
