"""A paced producer workload on a real Pulsar cluster, with the real Python client (``pulsar-client``).

For the ``tests/pulsar`` tier and the benches: topics with a message rate each (changed while it
runs), sent asynchronously in 20 ms ticks by one thread. Every acknowledgement is recorded with its
send time, so a run yields failed sends, publish latencies, and per-topic publish gaps (the longest
time between two acknowledged messages of a topic: what a bundle move costs a producer).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

TICK_S = 0.02


def client_logger() -> logging.Logger:
    """The Pulsar client's own log (its C++ core reconnecting while a bundle moves is expected and
    measured by the workload, not news for the launcher's terminal): shown only at DEBUG level."""
    import os

    logger = logging.getLogger("service.pulsar.client")
    debug = os.environ.get("LOADMGR_LOG_LEVEL", "").strip().upper() == "DEBUG"
    logger.setLevel(logging.DEBUG if debug else logging.CRITICAL)
    return logger


@dataclass
class TopicRecord:
    """One topic's acknowledgements: send time and latency, both seconds (monotonic clock)."""

    sent_at: array[float] = field(default_factory=lambda: array("d"))
    latency: array[float] = field(default_factory=lambda: array("d"))
    failed: int = 0
    last_ack: float | None = None
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (start, length) longer than 0.2 s


def topics_for_bundles(
    namespace: str, bundles: Iterable[str], per_bundle: int, prefix: str = "t"
) -> dict[str, str]:
    """``per_bundle`` topic names hashing into each of ``bundles`` (ranges ``0x…_0x…``) of
    ``namespace``, as Pulsar hashes them (CRC-32 of the topic name): topic -> bundle range."""
    from balancer.bundles import BundleRange, topic_hash

    ranges = [BundleRange.parse(b) for b in bundles]
    wanted = {r.text: per_bundle for r in ranges}
    found: dict[str, str] = {}
    i = 0
    while any(wanted.values()):
        topic = f"persistent://{namespace}/{prefix}{i}"
        h = topic_hash(topic)
        for r in ranges:
            if r.lower <= h < r.upper and wanted[r.text]:
                wanted[r.text] -= 1
                found[topic] = r.text
        i += 1
        if i > 1_000_000:
            raise RuntimeError("could not find topics for every bundle")
    return found


class Workload:
    """``start()`` connects and produces; ``set_rate(topic, r)``; ``stop()``; then the records."""

    def __init__(
        self,
        service_url: str,
        rates: Mapping[str, float],
        payload_bytes: int = 512,
        send_timeout_ms: int = 30_000,
    ) -> None:
        import pulsar  # the optional `pulsar` extra

        self._pulsar = pulsar
        self.service_url = service_url
        self.rates = dict(rates)
        self.payload = b"x" * payload_bytes
        self.send_timeout_ms = send_timeout_ms
        self.records: dict[str, TopicRecord] = {t: TopicRecord() for t in rates}
        self._producers: dict[str, Any] = {}
        self._client: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.started_at = 0.0

    def start(self) -> Workload:
        pulsar = self._pulsar
        self._client = pulsar.Client(
            self.service_url,
            operation_timeout_seconds=30,
            logger=client_logger(),
        )
        for topic in self.rates:
            self._producers[topic] = self._client.create_producer(
                topic,
                send_timeout_millis=self.send_timeout_ms,
                block_if_queue_full=True,
                batching_enabled=True,
                batching_max_publish_delay_ms=5,
            )
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="pulsar-workload", daemon=True)
        self._thread.start()
        return self

    def set_rate(self, topic: str, rate: float) -> None:
        with self._lock:
            self.rates[topic] = rate

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for p in self._producers.values():
            with contextlib.suppress(Exception):
                p.flush()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()

    def __enter__(self) -> Workload:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the sending thread --------------------------------------------------------------------------
    def _run(self) -> None:
        owed: dict[str, float] = dict.fromkeys(self.rates, 0.0)
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            dt, last = now - last, now
            with self._lock:
                rates = dict(self.rates)
            for topic, rate in rates.items():
                owed[topic] = owed.get(topic, 0.0) + rate * dt
                n = int(owed[topic])
                owed[topic] -= n
                producer = self._producers.get(topic)
                for _ in range(n):
                    self._send(topic, producer)
            self._stop.wait(max(0.0, TICK_S - (time.monotonic() - now)))

    def _send(self, topic: str, producer: Any) -> None:
        sent = time.monotonic()
        rec = self.records[topic]

        def done(result: Any, _msg_id: Any) -> None:
            now = time.monotonic()
            if result != self._pulsar.Result.Ok:
                rec.failed += 1
                return
            rec.sent_at.append(sent)
            rec.latency.append(now - sent)
            if rec.last_ack is not None and now - rec.last_ack > 0.2:
                rec.gaps.append((rec.last_ack, now - rec.last_ack))
            rec.last_ack = now

        try:
            producer.send_async(self.payload, done)
        except Exception as e:  # a client-side refusal counts as a failed send
            rec.failed += 1
            log.debug("send to %s refused: %s", topic, e)

    # ---- results -----------------------------------------------------------------------------------
    def failed(self) -> int:
        return sum(r.failed for r in self.records.values())

    def acked(self) -> int:
        return sum(len(r.sent_at) for r in self.records.values())

    def longest_gap(self, topics: Iterable[str] | None = None, since: float = 0.0) -> float:
        """Longest time without an acknowledgement on one of ``topics`` (all by default), seconds."""
        chosen = self.records if topics is None else {t: self.records[t] for t in topics}
        return max((g for r in chosen.values() for s, g in r.gaps if s >= since), default=0.0)

    def latency_percentile(self, q: float, start: float = 0.0, end: float = math.inf) -> float | None:
        """Publish latency (seconds) at percentile ``q`` of messages sent in [start, end)."""
        values = sorted(
            lat
            for r in self.records.values()
            for t, lat in zip(r.sent_at, r.latency, strict=True)
            if start <= t < end
        )
        if not values:
            return None
        return float(values[min(len(values) - 1, max(0, math.ceil(q / 100 * len(values)) - 1))])
