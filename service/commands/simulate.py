"""``loadmgr simulate``: run one scenario against one strategy pair and score the balancing: a table by
default, ``-o json|yaml`` (or ``--json``) for the whole result, ``--out FILE`` to write it to a file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from balancer.sim.engine import PAIRS, pair_named, simulate
from balancer.sim.metrics import quality, rate_ratio
from service.commands import argtypes
from service.commands.output import add_output_args, emit, table
from service.commands.scenario_files import load_scenario, scenario_names
from service.leader.solver_output import install as quiet_solver_output


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="Simulate a scenario under a strategy pair and score the balancing")
    p.add_argument("--scenario", help="scenario name (see --list)")
    p.add_argument(
        "--strategy",
        default="BalancedShedder",
        help=f"pair label ({', '.join(PAIRS)}) or SHEDDER+PLACEMENT",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--scale", type=argtypes.positive_float, default=1.0, help="multiply broker counts (small versions)"
    )
    p.add_argument("--cycles", type=argtypes.positive_int, help="override the scenario's number of cycles")
    p.add_argument("--out", help="also write the result here (JSON, or YAML with -o yaml)")
    add_output_args(p)
    p.add_argument("--series", action="store_true", help="include per-cycle utilisation min/mean/max")
    p.add_argument("--list", action="store_true", help="list scenarios and strategy pairs")
    p.set_defaults(func=_run)


def run_one(
    scenario: str,
    strategy: str,
    seed: int,
    scale: float = 1.0,
    cycles: int | None = None,
    series: bool = False,
) -> dict[str, Any]:
    s = load_scenario(scenario, scale=scale, cycles=cycles)
    pair = pair_named(strategy)
    result = simulate(s, pair, seed)
    has_jitter = any(ev.get("jitter") for ev in s.events)
    baseline = simulate(s, pair, seed, with_jitter=False) if has_jitter else None
    out: dict[str, Any] = {"quality": quality(result, baseline).to_dict(), "description": s.description}
    if series:
        out["series"] = [
            {
                "cycle": c.cycle,
                "unloads": c.unloads,
                "minUtil": min(c.util),
                "maxUtil": max(c.util),
                "meanUtil": sum(c.util) / len(c.util),
                "rateRatio": rate_ratio(c),
            }
            for c in result.cycles
        ]
    return out


def _run(args: argparse.Namespace) -> int:
    if args.list:
        for name in scenario_names():
            print(f"{name:22s} {load_scenario(name).description}")
        print("strategy pairs: " + ", ".join(PAIRS))
        return 0
    if not args.scenario:
        print("loadmgr simulate: --scenario is required (or --list)", file=sys.stderr)
        return 2
    quiet_solver_output()  # HiGHS's stray line would land in the middle of the JSON (issue 49)
    out = run_one(args.scenario, args.strategy, args.seed, args.scale, args.cycles, args.series)
    json.dumps(out, allow_nan=False)  # a NaN/inf is a bug, not output
    if args.out:
        from service.commands.output import dump

        fmt = "yaml" if args.output == "yaml" else "json"
        with open(args.out, "w") as f:
            f.write(dump(out, fmt) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)

    def render() -> list[Any]:
        q = out["quality"]
        rows = [[k, v] for k, v in q.items() if not isinstance(v, list | dict)]
        head = f"{args.scenario} under {args.strategy} (seed {args.seed}): {out['description']}"
        return [head, table(rows, ["metric", "value"])]

    return emit(args, out, render)
