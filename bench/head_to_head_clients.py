"""The head-to-head bench's clients: producers that number their messages, consumers that check them.

:class:`SequencedWorkload` is the paced workload of :mod:`service.pulsar.workload` whose messages
carry a per-topic sequence number (the payload's first 8 bytes, big-endian; Pulsar's Python client
does not hand a consumer the producer's sequence id), and which remembers which numbers the broker
acknowledged and which sends failed. :class:`SequenceChecker` subscribes to every topic before the
first send and records every number it receives; after the producers stop it waits until everything
acknowledged has arrived (or nothing more comes), and what is still missing is an acknowledged
message lost.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from bench.head_to_head_metrics import ReceivedSequence, SeqSet
from service.pulsar.workload import Workload

log = logging.getLogger(__name__)

SEQ_BYTES = 8
SUBSCRIPTION = "h2h-sequence-check"


class SequencedWorkload(Workload):
    """``mark(phase)`` notes each topic's next sequence number, so a number maps to its phase."""

    def __init__(self, service_url: str, rates: Mapping[str, float], payload_bytes: int = 512) -> None:
        if payload_bytes < SEQ_BYTES:
            raise ValueError(f"payload_bytes must be >= {SEQ_BYTES}, got {payload_bytes}")
        super().__init__(service_url, rates, payload_bytes)
        self.next_seq: dict[str, int] = dict.fromkeys(rates, 0)
        self.acked_seqs: dict[str, SeqSet] = {t: SeqSet() for t in rates}
        self.failed_seqs: dict[str, list[int]] = {t: [] for t in rates}
        self.marks: dict[str, dict[str, int]] = {}
        self._ack_lock = threading.Lock()

    def mark(self, phase: str) -> None:
        with self._lock:
            self.marks[phase] = dict(self.next_seq)

    def sent(self) -> int:
        return sum(self.next_seq.values())

    def _send(self, topic: str, producer: Any) -> None:
        # the base class's bookkeeping (latency, publish gaps, failures), plus the number
        seq = self.next_seq[topic]
        self.next_seq[topic] = seq + 1
        sent = time.monotonic()
        rec = self.records[topic]
        payload = seq.to_bytes(SEQ_BYTES, "big") + self.payload[SEQ_BYTES:]

        def done(result: Any, _msg_id: Any) -> None:
            now = time.monotonic()
            with self._ack_lock:
                if result != self._pulsar.Result.Ok:
                    rec.failed += 1
                    self.failed_seqs[topic].append(seq)
                    return
                self.acked_seqs[topic].add(seq)
                rec.sent_at.append(sent)
                rec.latency.append(now - sent)
                if rec.last_ack is not None and now - rec.last_ack > 0.2:
                    rec.gaps.append((rec.last_ack, now - rec.last_ack))
                rec.last_ack = now

        try:
            producer.send_async(payload, done)
        except Exception as e:  # a client-side refusal counts as a failed send
            with self._ack_lock:
                rec.failed += 1
                self.failed_seqs[topic].append(seq)
            log.debug("send to %s refused: %s", topic, e)


class SequenceChecker:
    """An exclusive subscription on every topic (from the earliest message), checking numbers."""

    def __init__(self, service_url: str, topics: Iterable[str], ack_every: int = 200) -> None:
        import pulsar

        self._pulsar = pulsar
        self.service_url = service_url
        self.topics = sorted(topics)
        self.ack_every = ack_every
        self.received: dict[str, ReceivedSequence] = {t: ReceivedSequence() for t in self.topics}
        self.malformed = 0
        self._since_ack: dict[str, int] = dict.fromkeys(self.topics, 0)
        self._lock = threading.Lock()
        self._client: Any = None
        self._consumers: dict[str, Any] = {}

    def start(self) -> SequenceChecker:
        pulsar = self._pulsar
        self._client = pulsar.Client(
            self.service_url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        for t in self.topics:
            self._consumers[t] = self._client.subscribe(
                t,
                SUBSCRIPTION,
                consumer_type=pulsar.ConsumerType.Exclusive,
                initial_position=pulsar.InitialPosition.Earliest,
                message_listener=self._on_message,
            )
        return self

    def _on_message(self, consumer: Any, msg: Any) -> None:
        topic = self._topic_of(msg)
        data = msg.data()
        with self._lock:
            if topic is None or len(data) < SEQ_BYTES:
                self.malformed += 1
            else:
                self.received[topic].receive(int.from_bytes(data[:SEQ_BYTES], "big"))
                self._since_ack[topic] += 1
                if self._since_ack[topic] < self.ack_every:
                    return
                self._since_ack[topic] = 0
        # cumulative: fewer acks on a broker with 0.3-0.6 core; a redelivery after a move is a
        # duplicate here, never a loss
        with contextlib.suppress(Exception):
            consumer.acknowledge_cumulative(msg)

    def _topic_of(self, msg: Any) -> str | None:
        name = msg.topic_name()
        if name in self.received:
            return str(name)
        return next((t for t in self.topics if name.endswith(t.split("://", 1)[-1])), None)

    def missing(self, acked: Mapping[str, SeqSet]) -> dict[str, list[int]]:
        """Per topic, the acknowledged numbers not received (so far)."""
        with self._lock:
            return {t: acked[t].missing_from(self.received[t].seen) for t in self.topics if t in acked}

    def drain(
        self, acked: Mapping[str, SeqSet], idle_s: float = 30.0, limit_s: float = 180.0
    ) -> dict[str, list[int]]:
        """Wait until every acknowledged number has arrived, or nothing has arrived for ``idle_s``
        (or ``limit_s`` passed); then the numbers still missing: lost acknowledged messages."""
        began = last_change = time.monotonic()
        last_count = -1
        while True:
            missing = self.missing(acked)
            if not any(missing.values()):
                return missing
            with self._lock:
                count = sum(r.seen.count for r in self.received.values())
            now = time.monotonic()
            if count != last_count:
                last_count, last_change = count, now
            if now - last_change >= idle_s or now - began >= limit_s:
                return missing
            time.sleep(1.0)

    def summary(self) -> dict[str, int]:
        with self._lock:
            rs = self.received.values()
            return {
                "received": sum(r.seen.count for r in rs),
                "duplicates": sum(r.duplicates for r in rs),
                "gaps": sum(r.gaps for r in rs),
                "late": sum(r.late for r in rs),
                "malformed": self.malformed,
            }

    def stop(self) -> None:
        for c in self._consumers.values():
            with contextlib.suppress(Exception):
                c.close()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()


def stop_run(serve: Any, *clients: Any) -> None:
    """A run's teardown, whatever failed: loadmgr's serve process (20 s to exit), then the clients."""
    if serve is not None and serve.poll() is None:
        serve.terminate()
        with contextlib.suppress(Exception):
            serve.wait(timeout=20)
    for client in clients:
        if client is not None:
            with contextlib.suppress(Exception):
                client.stop()
