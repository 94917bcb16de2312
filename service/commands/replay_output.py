"""``loadmgr replay``'s output: the side-by-side table (rich), the JSON file and one PNG per strategy.

Everything reads the JSON-able comparison built by :func:`service.commands.replay.compare`, so the
terminal, the file and the plots can never disagree.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any


def _num(v: Any, fmt: str = "{:.2f}") -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "inf"
    return fmt.format(v)


def print_table(c: dict[str, Any], console: Any = None) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table

    # Piped to a file or a CI log, rich would wrap at 80 columns and split every number from its unit.
    console = console or Console(width=None if sys.stdout.isatty() else 150)
    minutes = c["cycles"] * c["interval_minutes"]
    title = (
        f"Replay of {c['cycles']} recorded cycles ({minutes:.1f} min, one every "
        f"{c['interval_minutes'] * 60:.1f} s), {len(c['brokers'])} brokers, {c['bundles']} bundles"
    )
    t = Table(title=title, title_justify="left")
    t.add_column("strategy", no_wrap=True)
    for name in ("moves", "moved msg/s", "cycles to balanced", "final msg/s max/min", "final util spread",
                 "mean util spread", "uphill moves"):  # fmt: skip
        t.add_column(name, justify="right")
    for run in c["runs"]:
        q = run["quality"]
        ratio = None if q.get("final_rate_ratio_is_inf") else q["final_rate_ratio"]
        name = run["strategy"] + (" *" if run.get("recorded_pair") else "")
        t.add_row(
            f"[bold]{name}[/bold]" if run["recorded"] else name,
            str(q["unloads"]),
            _num(q["moved_rate"], "{:,.0f}"),
            _num(q["cycles_to_balanced"], "{}"),
            _num(ratio) if ratio is not None else "inf",
            _num(q["final_cpu_range"], "{:.1f} pts"),
            _num(run["mean_util_spread"], "{:.1f} pts"),
            str(q["uphill_moves"]),
        )
    console.print(t)
    console.print(
        "* the recorded strategy, replayed; utilisation = max(CPU, NIC in, NIC out) in % of each broker; "
        "balanced = msg/s max/min <= 1.25 per unit of capacity"
    )
    e = Table(
        title=f"How well the model reproduces the recorded utilisation ({c['recorded_strategy']})",
        title_justify="left",
    )
    e.add_column("broker", no_wrap=True)
    for name in (
        "recorded mean",
        "replay |err|",
        "replay rmse",
        "replay bias",
        "model-only |err|",
        "samples",
    ):
        e.add_column(name, justify="right")
    for broker, err in c["recorded_replay_error"].items():
        m = c["model_error"].get(broker, {})
        e.add_row(
            broker,
            _num(err["recorded_mean"], "{:.1f} %"),
            _num(err["mean_abs"], "{:.2f} pts"),
            _num(err["rmse"], "{:.2f} pts"),
            _num(err["bias"], "{:+.2f} pts"),
            _num(m.get("mean_abs"), "{:.2f} pts"),
            str(err["samples"]),
        )
    console.print(e)
    console.print(
        "replay = the recorded strategy replayed (its own decisions); model-only = the model on the "
        "ownership the leader really had, so the difference is what the replayed decisions changed"
    )
    console.print("[bold]Model assumptions[/bold] (" + c.get("config_source", "") + "):")
    for a in c["assumptions"]:
        console.print(f"  - {a}")
    fallback = [b for b, m in c["model"].items() if m["fleet_median_line"]]
    if fallback:
        console.print(f"  - on the fleet's median capacity line (CPU never varied): {', '.join(fallback)}")


def write_json(c: dict[str, Any], path: str) -> None:
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(clean(c), indent=1))


def plot_name(strategy: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", strategy).strip("-").lower() + ".png"


def write_plots(c: dict[str, Any], directory: str) -> list[Path]:
    """One PNG per replayed strategy: its utilisation spread per cycle over the recorded one."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed on a server
    import matplotlib.pyplot as plt

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    live = next(r for r in c["runs"] if r["recorded"])
    step = c["interval_minutes"]
    written = []
    for run in c["runs"]:
        if run["recorded"]:
            continue
        fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
        xs = [i * step for i in range(len(run["util_spread"]))]
        ax.plot(xs, live["util_spread"], color="0.6", lw=1.2, label="live leader (recorded)")
        ax.plot(xs, run["util_spread"], color="tab:blue", lw=1.6, label=f"{run['strategy']} (replayed)")
        moves = [m for m in _move_cycles(run)]
        if moves:
            ax.plot([i * step for i in moves], [0.0] * len(moves), "|", color="tab:red", ms=10, label="moves")
        q = run["quality"]
        ax.set_title(
            f"{run['strategy']}: {q['unloads']} moves, mean spread {run['mean_util_spread']:.1f} pts"
            f" (recorded {live['mean_util_spread']:.1f})",
            fontsize=10,
        )
        ax.set_xlabel("minutes since the first recorded cycle")
        ax.set_ylabel("utilisation max - min (pts)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        path = root / plot_name(run["strategy"])
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def _move_cycles(run: dict[str, Any]) -> list[int]:
    return list(run.get("move_cycles", []))
