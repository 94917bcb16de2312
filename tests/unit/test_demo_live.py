"""The demo's live view renders the broker table, the last moves with reasons and the spread sparkline."""

from __future__ import annotations

import io
import re
import time
from types import SimpleNamespace

from rich.console import Console

from balancer.models import LocalBrokerData, ResourceUsage
from service.demo.live import LiveView, sparkline


class _Demo:
    def __init__(self) -> None:
        self.url = "http://127.0.0.1:1234"
        self.zk_hosts = "127.0.0.1:2345"
        self.broker_ids = ["b1:8081", "b2:8082", "b3:8083"]
        self.balanced_after_s: float | None = None
        self.spread = 60.0
        self.fresh = ["shedding: ns/0x0_0x1 b1:8081 -> b2:8082  [overloaded] above the target"]
        self.brokers = {
            "b1:8081": LocalBrokerData(
                cpu=ResourceUsage(usage=90, limit=100),
                msg_rate_in=12000,
                last_update=int(time.time() * 1000) - 5000,
            ),
            "b2:8082": LocalBrokerData(cpu=ResourceUsage(usage=30, limit=100)),
        }
        self.service = SimpleNamespace(view=lambda: SimpleNamespace(brokers=self.brokers))

    def new_decisions(self) -> list[str]:
        out, self.fresh = self.fresh, []
        return out

    def cpu_spread(self) -> float:
        return self.spread

    def ownership_counts(self) -> dict[str, int]:
        return {"b1:8081": 5, "b2:8082": 1, "b3:8083": 0}

    def is_balanced(self) -> bool:
        return self.spread < 15


def _text(view: LiveView) -> str:
    console = Console(file=io.StringIO(), width=120, force_terminal=False, color_system=None)
    console.print(view.render())
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_live_view_shows_brokers_moves_and_spread_history() -> None:
    demo = _Demo()
    view = LiveView(demo, max_moves=2)
    view.poll()
    demo.spread = 10.0
    demo.balanced_after_s = 42.0
    demo.fresh = ["shedding: ns/0x1_0x2 b1:8081 -> b3:8083  [overloaded] a", "placement: x (unowned) -> b2"]
    view.poll()
    text = _text(view)
    assert "b1:8081" in text and "90.0" in text and "12,000" in text and "(down)" in text
    # Only the last two moves are kept, newest last, with their reasons.
    assert "ns/0x0_0x1" not in text and "[overloaded]" in text and "(unowned) -> b2" in text
    assert "cpu spread  10.0 points (balanced)" in text and "balanced after 42 s" in text
    assert sparkline([60.0, 10.0]) in text
    # Where the demo is (issue 34), and how old each report is: a live demo's reports stay young.
    assert "REST http://127.0.0.1:1234" in text and "ZooKeeper 127.0.0.1:2345" in text
    assert "report age" in text and re.search(r"\b[456] s\b", text), text
    view.note("demo stopping")
    assert "demo stopping" in _text(view)


def test_sparkline_scales_to_the_largest_value() -> None:
    assert sparkline([]) == ""
    assert sparkline([0.0, 0.0]) == "▁▁"
    assert sparkline([10.0, 5.0, 0.0]) == "█▅▁"
    assert sparkline([1.0], top=8.0) == "▂"
