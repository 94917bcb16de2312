"""The report part shared by the per-seed A/B benches on real brokers (:mod:`bench.drain_vs_shutdown`,
:mod:`bench.warm_first_move`): each seed's result is ``<out>/seed-N.json``; the report reads back the
seeds asked for that exist (``--report-only`` redraws it from them), prints it and writes it to
``<out>/table.md``, as Markdown tables."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None when there is nothing to rank."""
    if not values:
        return None
    s = sorted(values)
    return float(s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))])


def md_row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_head(head: Sequence[str]) -> list[str]:
    """A table's header line and the separator under it."""
    return [md_row(head), "|" + "---|" * len(head)]


def load_of(uptime: str) -> str:
    """The load averages out of an ``uptime`` line (the machine's load when a run started)."""
    return uptime.split("load average:")[-1].strip()


def read_runs(root: Path, seeds: Iterable[int]) -> list[dict[str, Any]]:
    """Each seed's saved result, in the order asked; a seed not run (no file) is left out."""
    return [
        json.loads((root / f"seed-{s}.json").read_text(encoding="utf-8"))
        for s in seeds
        if (root / f"seed-{s}.json").exists()
    ]


def write_report(root: Path, text: str) -> None:
    (root / "table.md").write_text(text, encoding="utf-8")
    print(text)
