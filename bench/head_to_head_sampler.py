"""The head-to-head bench's sampler: what Pulsar says about each broker, polled the same way for
every contender — per-broker message rates from ``/admin/v2/broker-stats/topics``, ownership from a
lookup of one topic per bundle, and resource usage from each broker's load report (Modular) or its
``pulsar_lb_*`` gauges (Extensible)."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any


class Sampler(threading.Thread):
    def __init__(self, admin: Any, cluster: Any, probes: dict[str, str], every: float) -> None:
        super().__init__(daemon=True, name="sampler")
        self.admin, self.cluster, self.probes, self.every = admin, cluster, probes, every
        self.rates: list[tuple[float, dict[str, float]]] = []
        self.owners: list[tuple[float, dict[str, str]]] = []
        self.usage: list[tuple[float, dict[str, dict[str, float]]]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            began = time.monotonic()
            owners: dict[str, str] = {}
            for bundle, topic in self.probes.items():
                with contextlib.suppress(Exception):
                    owners[bundle] = self.admin.lookup(topic)
            t = time.monotonic()
            self.owners.append((t, owners))
            rates: dict[str, float] = {}
            for b in list(self.cluster.brokers):
                if not b.running:
                    continue
                with contextlib.suppress(Exception):
                    doc = self.admin.get_json("/admin/v2/broker-stats/topics", b.web_url)
                    rates[b.broker_id] = _sum_key(doc, "msgRateIn")
            self.rates.append((time.monotonic(), rates))
            if n % 3 == 0:
                self.usage.append((time.monotonic(), self._usage()))
            n += 1
            self.stop_event.wait(max(0.0, self.every - (time.monotonic() - began)))

    def _usage(self) -> dict[str, dict[str, float]]:
        """Each broker's resource usage in percent of its own limits: from its load report
        (Modular), else from its ``pulsar_lb_*_usage`` gauges on /metrics (Extensible, whose
        /broker-stats/load-report answers an error)."""
        out: dict[str, dict[str, float]] = {}
        for b in list(self.cluster.brokers):
            if not b.running:
                continue
            with contextlib.suppress(Exception):
                out[b.broker_id] = _usage_of(self.admin.load_report(b.web_url))
                continue
            with contextlib.suppress(Exception):
                text = self.admin.request("GET", "/metrics/", base=b.web_url).text
                out[b.broker_id] = lb_gauges(text)
        return out


USAGE_KEYS = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
GAUGES = {
    "pulsar_lb_cpu_usage": "cpu",
    "pulsar_lb_memory_usage": "memory",
    "pulsar_lb_directMemory_usage": "directMemory",
    "pulsar_lb_bandwidth_in_usage": "bandwidthIn",
    "pulsar_lb_bandwidth_out_usage": "bandwidthOut",
}


def _usage_of(report: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in USAGE_KEYS:
        r = report.get(k) or {}
        usage, limit = float(r.get("usage", -1.0)), float(r.get("limit", -1.0))
        out[k] = 100.0 * usage / limit if limit > 0 else -1.0
    out["cpuLimit"] = float((report.get("cpu") or {}).get("limit", -1.0))
    return out


def lb_gauges(text: str) -> dict[str, float]:
    """Pulsar's load-balancing gauges (percent) from a broker's Prometheus text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in GAUGES:
            out[GAUGES[name]] = float(line.rsplit(" ", 1)[1])
    if not out:
        raise ValueError("no pulsar_lb_* gauges")
    return out


def _sum_key(doc: Any, key: str) -> float:
    if isinstance(doc, dict):
        if isinstance(doc.get(key), int | float):
            return float(doc[key])
        return sum(_sum_key(v, key) for v in doc.values())
    return 0.0
