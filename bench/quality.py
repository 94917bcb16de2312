"""Balancing quality as distributions: every scenario family x N generated instances x every
strategy pair, in one run, with BalancedShedder's claims checked on the result.

    .venv/bin/python bench/quality.py [--instances 100] [--jobs 2] [--families NAME ...] [--rows FILE]
        [--planner exact|fill] [--rows-from FILE]

Writes the ``## Balancing quality over scenario families (issue 19)`` section of BENCHMARKS.md (with
``--planner fill``, the water-fill-alone section beside it): per
family and strategy the median and 95th percentile of each metric (``balancer/sim/family_claims.py``
defines them) and the claims with PASS/FAIL. The named scenarios stay as regression cases in
``bench/quality_named.py``. Exit status 1 when a claim fails.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from quality_named import write_section  # noqa: E402

from balancer.sim.engine import PAIRS  # noqa: E402
from balancer.sim.families import FAMILIES, instance  # noqa: E402
from balancer.sim.family_claims import METRICS, claims, notes, run_row, summarise  # noqa: E402
from balancer.sim.metrics import UPHILL_MARGIN  # noqa: E402
from balancer.sim.plan_cost import Recording, plan_costs  # noqa: E402
from service.leader.solver_output import install as quiet_solver_output  # noqa: E402

HEADING = "## Balancing quality over scenario families (issue 19)"
# BalancedShedder's plan -> the section its run writes: the planner-on run never replaces the default's.
PLANNER_KEY = "loadBalancerBalancedShedderPlanner"
TIME_LIMIT_KEY = "loadBalancerBalancedShedderPlannerTimeLimitSeconds"
HEADINGS = {
    "exact": HEADING,
    "fill": "## Balancing quality with the water-fill alone (the least-move planner off; issue 31)",
}


def use_planner(name: str) -> None:
    """BalancedShedder's plan in this process: the least-move planner's on top of the water-fill (the
    default, ``balancer/shedding/least_move.py``, issue 31) or the fill's alone, through the
    key an operator sets, ``loadBalancerBalancedShedderPlanner``."""
    PAIRS["BalancedShedder"].config[PLANNER_KEY] = "leastMove" if name == "exact" else "fill"
    # Seeded runs give the same rows whatever the machine's load (``--rows-from`` relies on it): the
    # planner's wall-clock limit, which a shared machine can reach, is set beyond any solve here.
    PAIRS["BalancedShedder"].config[TIME_LIMIT_KEY] = 600.0
    quiet_solver_output()  # HiGHS 1.12's stray line stays out of the run's output (issue 49)


def require_planner(ap: argparse.ArgumentParser, name: str) -> None:
    """Refuse ``--planner exact`` without scipy: the planner would return nothing and every run would
    silently be the fill's."""
    if name == "exact":
        try:
            import scipy  # noqa: F401
        except ImportError:
            ap.error("--planner exact needs scipy: .venv/bin/pip install -e '.[oracle]' (make installs it)")


def earlier_rows(
    ap: argparse.ArgumentParser, path: Path, wanted: set[tuple[str, int, str]]
) -> list[dict[str, Any]]:
    """The rows of ``path`` this run would produce ("inf" read back as infinity): a BalancedShedder
    row only if it says it ran with this run's plan. A file that is not such a list is refused by name."""
    plan = PAIRS["BalancedShedder"].config.get(PLANNER_KEY)
    try:
        raw = json.loads(path.read_text())
        rows = [
            {k: math.inf if v == "inf" else v for k, v in r.items()}
            for r in raw
            if (r["family"], r["instance"], r["strategy"]) in wanted
            and (r["strategy"] != "BalancedShedder" or r.get("planner") == plan)
        ]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        ap.error(f"--rows-from {path}: not the rows file of an earlier run ({e})")
    return rows


def run_job(job: tuple[str, int, str]) -> dict[str, Any]:
    family, i, label = job
    sim = Recording(instance(family, i), PAIRS[label], i)
    r = sim.run()
    row = run_row(family, i, r, plan_costs(sim, r).run)
    if PLANNER_KEY in PAIRS[label].config:
        row["planner"] = PAIRS[label].config[PLANNER_KEY]  # --rows-from reuses only the same plan's
    return row


def _json_safe(v: Any) -> Any:
    return "inf" if isinstance(v, float) and math.isinf(v) else v


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "∞"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}".rstrip("0").rstrip(".") if v != int(v) else f"{v:.0f}"


def render(
    rows: list[dict[str, Any]],
    n: int,
    wall: float,
    jobs: int,
    extra: str = "",
    heading: str = HEADING,
    where: str = "in one run",
) -> tuple[str, bool]:
    summary = summarise(rows)
    labels = sorted({r["strategy"] for r in rows})
    verdicts = claims(rows)
    lines = [
        heading,
        "",
        f"Produced by `.venv/bin/python bench/quality.py --instances {n} --jobs {jobs}{extra}` {where}"
        f" ({wall:.0f} s wall, 2-core machine shared with other work): {len(FAMILIES)} families"
        f" (`balancer/sim/families.py`) x instances 0..{n - 1} x {len(labels)} strategy pairs, each instance"
        " simulated with its own number as seed. Cells are *median / 95th percentile* over the instances"
        " (∞ = never balanced; — = no instance qualifies). *per plan moved / least* (the cost claim, issue"
        " 31): each shedding cycle's moves since the last disturbance at the traffic they were decided"
        " on, over the least any plan must move there to reach the balance they reach; per run the sum of"
        " moved over the sum of least (`balancer/sim/plan_cost.py`). *moved / least*: moved msg rate"
        " since the last"
        " disturbance over the least any strategy must move to reach the balance of the run's final"
        " assignment, both at the traffic of the last disturbance (families"
        " where only the strategy moves traffic, runs that moved). *final max/min*: normalised msg rate"
        " (utilisation in `cpu_vs_nic`). *cycles to balance*: from the last disturbance, its own included."
        f" *uphill*: moves whose destination's load (utilisation without this interval's CPU noise) exceeded"
        f" the source's by more than {UPHILL_MARGIN:.0f} points. *averaged max/min*: of each broker's"
        " normalised msg rate averaged over the run's second half. *moved*: instances with any unload.",
        "",
        "### Claims for BalancedShedder, checked on this run",
        "",
        *(f"- {'PASS' if ok else 'FAIL'}: {text}" for ok, text in verdicts),
        "",
        "Judged another way (reported, not claims; `family_claims.notes`):",
        "",
        *(f"- {text}" for text in notes(rows)),
        "",
        "| family | strategy | moved | " + " | ".join(h for _, h in METRICS) + " |",
        "|---|---|---|" + "---|" * len(METRICS),
    ]
    for f in FAMILIES:
        for label in PAIRS:
            st = summary.get((f, label))
            if st is None:
                continue
            cells = ["—" if st[m] is None else f"{_fmt(st[m][0])} / {_fmt(st[m][1])}" for m, _ in METRICS]
            lines.append(f"| {f} | {label} | {st['moved']}/{st['n']} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines), all(ok for ok, _ in verdicts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--families", nargs="*", choices=list(FAMILIES), help="default: all")
    ap.add_argument("--strategies", nargs="*", choices=list(PAIRS), help="default: all")
    ap.add_argument("--no-write", action="store_true", help="print the section, leave BENCHMARKS.md")
    ap.add_argument(
        "--planner",
        choices=["exact", "fill"],
        default="exact",
        help="BalancedShedder's plan: the least-move planner on the water-fill (default) or the fill alone",
    )
    ap.add_argument("--rows", type=Path, help="also write every run's numbers here (JSON, for digging)")
    ap.add_argument(
        "--rows-from",
        type=Path,
        help="take the runs this file (an earlier --rows) holds for the same instances, run only the rest;"
        " the section then says how many runs came from it (runs are seeded: the same code gives the"
        " same row)",
    )
    args = ap.parse_args()
    if args.instances < 1 or args.jobs < 1:
        ap.error(f"--instances and --jobs must be >= 1 (got {args.instances}, {args.jobs})")
    fams = args.families or list(FAMILIES)
    labels = args.strategies or list(PAIRS)
    require_planner(ap, args.planner)
    jobs = [(f, i, label) for f in fams for i in range(args.instances) for label in labels]
    use_planner(args.planner)  # here too: which earlier rows are this plan's
    kept = earlier_rows(ap, args.rows_from, set(jobs)) if args.rows_from else []
    done = {(r["family"], r["instance"], r["strategy"]) for r in kept}
    jobs = [j for j in jobs if j not in done]
    t0 = time.perf_counter()
    with multiprocessing.Pool(args.jobs, initializer=use_planner, initargs=(args.planner,)) as pool:
        rows = kept + list(pool.imap_unordered(run_job, jobs, chunksize=8))
    wall = time.perf_counter() - t0
    extra = f" --strategies {' '.join(args.strategies)}" if args.strategies else ""
    where = "in one run"
    if args.rows_from:
        extra += f" --rows-from {args.rows_from}"
        where = (
            f"with {len(kept)} of its runs taken from that file (an earlier run of the same code: runs are"
            f" seeded, so the rows are the same) and the other {len(jobs)} run here"
        )
    if args.planner != "exact":
        extra += f" --planner {args.planner}"
    heading = HEADINGS[args.planner]
    text, ok = render(rows, args.instances, wall, args.jobs, extra, heading, where)
    if args.rows:
        ordered = sorted(rows, key=lambda r: (r["family"], r["instance"], r["strategy"]))
        # JSON has no infinity: "never balanced" and "unbounded" are written as the string "inf".
        plain = [{k: _json_safe(v) for k, v in r.items()} for r in ordered]
        args.rows.write_text(json.dumps(plain, indent=1) + "\n")
    if args.no_write:
        print(text)
    else:
        write_section(text, heading)
        print(text.split("\n| family")[0])
    print(f"{len(jobs)} runs in {wall:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
