"""Where BalancedShedder's move cost goes: each shedding cycle's plan judged on its own.

    .venv/bin/python bench/cost_per_plan.py [--instances 30] [--families NAME ...] [--jobs 2]
        [--planner exact|fill] [--one-size]

The family bench judges a whole run's moves at the traffic of the last disturbance; the oracle
(``bench/cost_oracle.py``) compares the run with the cheapest single plan. This judges every cycle's
moves at the traffic they were decided on (the reports of the interval before), against the least
any plan must move there to reach the balance those moves reach: moved / least per plan, and per
run the sum of the plans' moved over the sum of their least. A plan that levels only the brokers
that triggered leaves the cluster's max/min to the ones that did not, and buys little of the
balance the claim prices. Prints a table; writes nothing (figures quoted in docs/strategy.md).

``--one-size`` gives every bundle one message size (1 KiB). BalancedShedder balances what brokers
report, which the simulator makes cost msg rate + bytes / 6 KiB (CPU per message grows with its
size), while the claim prices and balances msg rate alone: with message sizes of 512 B-2 KiB the two
differ by up to a quarter per bundle, and a plan least by one is not least by the other. With one
size they are one metric; the difference between the two tables is what the mismatch costs (issue 31).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cost_oracle import DEFAULT_FAMILIES, median_p95  # noqa: E402
from quality import require_planner, use_planner  # noqa: E402

from balancer.sim.engine import PAIRS  # noqa: E402
from balancer.sim.families import FAMILIES, instance  # noqa: E402
from balancer.sim.family_claims import run_row  # noqa: E402
from balancer.sim.plan_cost import Recording, plan_costs  # noqa: E402


def one(job: tuple[str, int, str, bool]) -> dict[str, Any]:
    family, i, planner, one_size = job
    use_planner(planner)
    inst = instance(family, i)
    if one_size:
        inst = dataclasses.replace(
            inst,
            msg_size_range=(ONE_SIZE, ONE_SIZE),
            groups=[dataclasses.replace(g, msg_size=None) for g in inst.groups],
        )
    sim = Recording(inst, PAIRS["BalancedShedder"], i)
    r = sim.run()
    pc = plan_costs(sim, r)
    return {
        "family": family,
        "claim": run_row(family, i, r)["cost"],
        "plans": pc.plans,
        "run": pc.run,
    }


ONE_SIZE = 1024.0  # bytes per message with --one-size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=30)
    ap.add_argument("--families", nargs="*", choices=sorted(FAMILIES), default=DEFAULT_FAMILIES)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--planner", choices=["exact", "fill"], default="exact", help="BalancedShedder's plan")
    ap.add_argument("--one-size", action="store_true", help=f"every message {ONE_SIZE:.0f} bytes")
    args = ap.parse_args()
    if args.instances < 1 or args.jobs < 1:
        ap.error(f"--instances and --jobs must be >= 1 (got {args.instances}, {args.jobs})")
    require_planner(ap, args.planner)
    jobs = [(f, i, args.planner, args.one_size) for f in args.families for i in range(args.instances)]
    with ProcessPoolExecutor(args.jobs) as ex:
        rows = list(ex.map(one, jobs))
    print(f"planner {args.planner}, message sizes {'one (1 KiB)' if args.one_size else 'as generated'}")
    print(
        "| family | runs | as the bench judges | first plan | every plan | plans per run"
        " | run (sum of plans) |\n|---|---|---|---|---|---|---|"
    )
    for f in args.families:
        mine = [x for x in rows if x["family"] == f and x["plans"]]
        print(
            f"| {f} | {len(mine)} | {median_p95([x['claim'] for x in mine if x['claim'] is not None])}"
            f" | {median_p95([x['plans'][0] for x in mine])}"
            f" | {median_p95([p for x in mine for p in x['plans']])}"
            f" | {median_p95([float(len(x['plans'])) for x in mine])}"
            f" | {median_p95([x['run'] for x in mine if x['run'] is not None])} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
