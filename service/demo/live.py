"""The demo's live terminal view (rich ``Live``): the broker table redrawn in place, the latest moves
with their reasons below it, and the CPU spread with a sparkline of its recent history.

Only for a terminal: a log file or a pipe gets the plain timestamped lines of :mod:`service.demo.cluster`.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], top: float | None = None) -> str:
    """One block character per value, scaled to ``top`` (default: the largest value)."""
    if not values:
        return ""
    scale = top if top is not None else max(values)
    if scale <= 0:
        return SPARK[0] * len(values)
    last = len(SPARK) - 1
    return "".join(SPARK[min(last, max(0, round(v / scale * last)))] for v in values)


def _age(last_update_ms: int) -> str:
    """How old a broker's load report is: a demo whose reports stop ageing is alive."""
    if last_update_ms <= 0:
        return "-"
    return f"{max(0.0, time.time() - last_update_ms / 1000):.0f} s"


class LiveView:
    """What one redraw shows; ``poll()`` takes in new decisions and the current spread."""

    def __init__(self, demo: Any, max_moves: int = 8, history: int = 60) -> None:
        self.demo = demo
        self.moves: deque[str] = deque(maxlen=max_moves)
        self.spreads: deque[float] = deque(maxlen=history)
        self.notes: deque[str] = deque(maxlen=3)

    def note(self, text: str) -> None:
        self.notes.append(f"{time.strftime('%H:%M:%S')} {text}")

    def poll(self) -> None:
        for line in self.demo.new_decisions():
            self.moves.append(f"{time.strftime('%H:%M:%S')} {line}")
        spread = self.demo.cpu_spread()
        if spread is not None:
            self.spreads.append(spread)

    def render(self) -> RenderableType:
        return Group(
            self._title(),
            self._brokers(),
            self._moves(),
            self._balance(),
            *(Text(n, style="dim") for n in self.notes),
        )

    def _title(self) -> Text:
        """The addresses on a line of their own: a table's title wraps at the table's width, which is
        narrower than these on an 80-column terminal."""
        zk = getattr(self.demo, "zk_hosts", "")
        where = f"REST {self.demo.url}" + (f"  ZooKeeper {zk}" if zk else "")
        title = Text(f"loadmgr demo  {where}", style="bold", overflow="fold")
        return title.append("  Ctrl-C to stop" if len(title) <= 60 else "\nCtrl-C to stop", style="dim")

    def _brokers(self) -> Table:
        demo = self.demo
        view = demo.service.view()
        counts = demo.ownership_counts()
        table = Table(expand=False)
        for name, justify in (
            ("broker", "left"),
            ("cpu %", "right"),
            ("nic-in %", "right"),
            ("msg/s", "right"),
            ("MB/s", "right"),
            ("bundles", "right"),
            ("report age", "right"),
        ):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for broker in demo.broker_ids:
            d = view.brokers.get(broker)
            if d is None:
                table.add_row(broker, "(down)", "", "", "", "", "")
                continue
            cpu = d.cpu.percent_usage()
            table.add_row(
                broker,
                Text(f"{cpu:.1f}", style="bold red" if cpu > 80 else ""),
                f"{d.bandwidth_in.percent_usage():.1f}",
                f"{d.msg_rate_in + d.msg_rate_out:,.0f}",
                f"{d.msg_throughput / 1e6:.2f}",
                str(counts.get(broker, 0)),
                _age(d.last_update),
            )
        return table

    def _moves(self) -> Panel:
        body = Text("\n".join(self.moves)) if self.moves else Text("no moves yet", style="dim")
        return Panel(body, title=f"last {self.moves.maxlen} moves, with reasons", title_align="left")

    def _balance(self) -> Text:
        demo = self.demo
        spread = self.spreads[-1] if self.spreads else None
        if spread is None:
            return Text("waiting for every broker's first load report")
        state = "balanced" if demo.is_balanced() else "skewed"
        line = Text(f"cpu spread {spread:5.1f} points ({state})  ")
        line.append(sparkline(list(self.spreads)), style="green" if state == "balanced" else "yellow")
        if demo.balanced_after_s is not None:
            line.append(f"  balanced after {demo.balanced_after_s:.0f} s", style="bold green")
        return line
