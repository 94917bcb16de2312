"""Watching a running demo: who owns what, whether the brokers are balanced, and the output a terminal
(a live view redrawn in place, :mod:`service.demo.live`) or a log file (plain timestamped lines: the
broker table every 10 s and every decision with its reason) gets. :class:`DemoWatch` is the half of
:class:`service.demo.cluster.Demo` that only reads the cluster it started."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from service.demo.options import DemoOptions


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


class DemoWatch:
    """Reads what :class:`service.demo.cluster.Demo` started; never changes the cluster (the living
    demo's churn, which does, stays with the lifecycle)."""

    opts: DemoOptions
    out: TextIO
    service: Any
    broker_ids: list[str]
    started_at: float
    balanced_after_s: float | None
    away: str | None
    _stop: threading.Event
    _seen_decision: int
    _say_live: Callable[[str], None] | None

    def churn(self, now: float | None = None) -> str | None:
        raise NotImplementedError

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
