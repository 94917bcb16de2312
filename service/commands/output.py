"""How every client verb prints: ``-o table`` (rich tables, the default), ``-o json`` or ``-o yaml``
(pulsarctl's ``-o``); ``--json`` stays as a synonym of ``-o json``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

FORMATS = ("table", "json", "yaml")


def add_output_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="table",
        help="Output format: table (default), json or yaml (pulsarctl's -o)",
    )
    parser.add_argument("--json", dest="output", action="store_const", const="json", help="Same as -o json")


def console() -> Any:
    from rich.console import Console

    # Piped to a file or another program, rich would wrap at 80 columns: keep rows whole.
    return Console(width=None if sys.stdout.isatty() else 200, highlight=False, soft_wrap=False)


def dump(body: Any, fmt: str) -> str:
    if fmt == "yaml":
        import yaml

        return str(yaml.safe_dump(body, sort_keys=False, default_flow_style=False)).rstrip("\n")
    return json.dumps(body, indent=2)


def emit(args: argparse.Namespace, body: Any, render: Callable[[], Any]) -> int:
    """Prints ``body`` as JSON/YAML, or what ``render()`` returns (a string or rich renderables)."""
    fmt = getattr(args, "output", None) or "table"
    if fmt != "table":
        print(dump(body, fmt))
        return 0
    out = render()
    items = out if isinstance(out, list) else [out]
    c = console()
    with c.capture() as captured:
        for item in items:
            if isinstance(item, str):
                c.print(item, markup=False, soft_wrap=True)  # a line of text is never cut in two
            else:
                c.print(item)
    # rich pads every cell to its column's width: a table with one long value would print every row
    # as wide as that value. Trailing blanks say nothing; drop them.
    text = "\n".join(line.rstrip() for line in captured.get().split("\n"))
    sys.stdout.write(text)
    return 0


def cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):  # as JSON and pulsar-admin write it, never Python's True/False
        return "true" if v else "false"
    if isinstance(v, float):
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.1f}" if abs(v) >= 1 or v == 0 else f"{v:.2g}"
    return str(v)


def table(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], title: str | None = None, left: int = 1
) -> Any:
    """A rich table: the first ``left`` columns left-aligned (names), the others (numbers) right-aligned."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i, h in enumerate(headers):
        t.add_column(str(h), justify="left" if i < left else "right", no_wrap=i == 0)
    for r in rows:
        t.add_row(*(cell(v) for v in r))
    return t
