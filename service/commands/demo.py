"""``loadmgr demo`` (what ``make run`` starts): a skewed simulated cluster balancing itself, live."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import Any

from service.commands import argtypes


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="Embedded ZooKeeper + leader (REST) + simulated brokers, starting skewed",
        description="A whole cluster in one process: an embedded ZooKeeper, a load-manager leader with "
        "REST and /metrics, simulated brokers whose bundles all start on the first one. The load lives "
        "(a diurnal wave, tenant bursts, a broker leaving and returning) unless --steady. Its REST and "
        "ZooKeeper addresses are recorded in ~/.loadmgr/demo.json (LOADMGR_DEMO_STATE), where every "
        "other loadmgr verb finds them.",
    )
    p.add_argument("--brokers", type=argtypes.positive_int, default=4, help="Simulated brokers (default 4)")
    p.add_argument(
        "--bundles", type=argtypes.positive_int, default=16, help="Bundles of public/default (default 16)"
    )
    p.add_argument(
        "--port",
        type=argtypes.port_or_zero,
        default=8080,
        help="REST port (default 8080; a free one if taken; 0: any)",
    )
    p.add_argument(
        "--shed-interval",
        type=argtypes.positive_float,
        default=5.0,
        help="Seconds between shedding cycles (default 5; Pulsar's is 1 minute)",
    )
    p.add_argument(
        "--strategy",
        default="BalancedShedder",
        help="Shedding strategy: any Pulsar shedder or BalancedShedder (default BalancedShedder)",
    )
    p.add_argument("--token", default=None, help="Require this bearer token for mutations")
    p.add_argument(
        "--duration",
        type=argtypes.positive_float,
        default=None,
        help="Stop after this many seconds (default: until Ctrl-C)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=7,
        help="Seed of the simulated traffic (bundle sizes, the tenants' days, bursts) and of "
        "placement (default 7)",
    )
    p.add_argument(
        "--steady",
        action="store_true",
        help="A load that never changes once balanced (no wave, bursts or leaving broker)",
    )
    p.add_argument(
        "--day",
        type=argtypes.positive_float,
        default=600.0,
        help="Seconds of one simulated day, the diurnal wave's period (default 600)",
    )
    p.add_argument(
        "--history",
        default="./var/history",
        help="Record the leader's cycles and moves as Parquet here for loadmgr replay and longterm "
        "(default ./var/history)",
    )
    p.add_argument("--no-history", action="store_true", help="Record no history")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from service.demo.cluster import Demo, DemoOptions

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    opts = DemoOptions(
        brokers=args.brokers,
        bundles=args.bundles,
        port=args.port,
        shed_interval_s=args.shed_interval,
        seed=args.seed,
        token=args.token,
        strategy=args.strategy,
        history=None if args.no_history else args.history,
        living=not args.steady,
        day_s=args.day,
    )
    if opts.brokers < 2 or opts.bundles < opts.brokers:
        print("loadmgr: the demo needs at least 2 brokers and as many bundles as brokers")
        return 2
    demo = Demo(opts)

    def _terminate(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    try:
        demo.start()
        demo.run(args.duration)
    except KeyboardInterrupt:
        pass
    finally:
        demo.stop()
    return 0
