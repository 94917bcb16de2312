"""What loadmgr reads from brokers running ``ExtensibleLoadManagerImpl`` (PIP-192), Pulsar 4.0.7.

Such brokers keep nothing loadmgr reads under Modular's paths: ``/loadbalance/brokers/<id>`` holds
their BrokerLookupData (URLs, no load) and nobody writes ``/namespace/...`` ownership nodes. Here:

* ownership: the service-unit state channel, ``persistent://pulsar/system/loadbalancer-service-unit-state``
  (key: the bundle, value: ServiceUnitStateData JSON, latest per key wins; an empty value deletes),
  read with the real ``pulsar-client`` from the start of its compacted view; or, when the brokers run
  ``ServiceUnitStateMetadataStoreTableViewImpl`` (PIP-378), the same JSON under
  ``/service_unit_state/<tenant>/<ns>/<range>`` in the metadata store. ``Owned`` names the owner
  (``dstBroker``); ``Splitting`` is still served by its ``sourceBroker``; a bundle in any other state
  is moving and owned by nobody for that moment;
* host usage: BrokerLoadData that every broker publishes (keyed by broker id) on the non-persistent
  ``loadbalancer-broker-load-data`` topic (no history: a reader sees the next report, at most
  ``loadBalancerReportUpdateMaxIntervalMinutes`` away);
* per-bundle stats: ``GET /admin/v2/broker-stats/topics`` of each broker, folded per bundle. The
  ``loadbalancer-top-bundles-load-data`` topic carries only the top
  ``loadBalancerMaxNumberOfBundlesInBundleLoadReport`` bundles, and
  ``/admin/v2/broker-stats/load-report`` answers 500 on these brokers (UnsupportedOperationException
  from ExtensibleLoadManagerWrapper.generateLoadReport).

:class:`ExtensibleReads` does those reads on a thread of its own and keeps, per broker, a
LocalBrokerData built from them, so the leader's refresh does no I/O for them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from balancer.models import LocalBrokerData, NamespaceBundleStats, ResourceUsage
from balancer.topic_stats import sum_topics_per_bundle
from service.errors import ExecutorError
from service.pulsar.admin import PulsarAdmin
from service.zookeeper.metadata.records import Owner

log = logging.getLogger(__name__)

CHANNEL_TOPIC = "persistent://pulsar/system/loadbalancer-service-unit-state"
BROKER_LOAD_TOPIC = "non-persistent://pulsar/system/loadbalancer-broker-load-data"
METADATA_CHANNEL_ROOT = "/service_unit_state"
TOPIC_TABLE_VIEW = "org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateTableViewImpl"
METADATA_TABLE_VIEW = (
    "org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateMetadataStoreTableViewImpl"
)
# The same figures as Prometheus gauges (percent), generated afresh at each scrape of /metrics/:
# what loadmgr uses for a broker until its first BrokerLoadData arrives on the topic.
_GAUGES = {
    "pulsar_lb_cpu_usage": "cpu",
    "pulsar_lb_memory_usage": "memory",
    "pulsar_lb_directMemory_usage": "direct_memory",
    "pulsar_lb_bandwidth_in_usage": "bandwidth_in",
    "pulsar_lb_bandwidth_out_usage": "bandwidth_out",
}
_RESOURCES = {
    "cpu": "cpu",
    "memory": "memory",
    "direct_memory": "directMemory",
    "bandwidth_in": "bandwidthIn",
    "bandwidth_out": "bandwidthOut",
}


@dataclass(frozen=True)
class UnitState:
    """One bundle's entry of the channel (ServiceUnitStateData's fields loadmgr uses)."""

    state: str
    dst: str | None
    source: str | None
    version: int

    def owner(self) -> str | None:
        if self.state == "Owned":
            return self.dst
        if self.state == "Splitting":
            return self.source
        return None


def parse_unit_state(raw: bytes) -> UnitState | None:
    """ServiceUnitStateData JSON -> UnitState; None for a tombstone or anything unusable."""
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("state"), str):
        return None
    dst, src, ver = doc.get("dstBroker"), doc.get("sourceBroker"), doc.get("versionId")
    return UnitState(
        state=str(doc["state"]),
        dst=dst if isinstance(dst, str) and dst else None,
        source=src if isinstance(src, str) and src else None,
        version=ver if isinstance(ver, int) and not isinstance(ver, bool) else 0,
    )


def parse_broker_load(raw: bytes) -> dict[str, ResourceUsage] | None:
    """BrokerLoadData JSON -> LocalBrokerData's resource fields; None when unusable."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    out: dict[str, ResourceUsage] = {}
    for ours, theirs in _RESOURCES.items():
        res = doc.get(theirs)
        if not isinstance(res, dict):
            return None
        try:
            usage = ResourceUsage.model_validate(res)
        except ValueError:
            return None
        if not all(0 <= v < 1e300 for v in (usage.usage, usage.limit)):
            return None
        out[ours] = usage
    return out


def parse_lb_gauges(text: str) -> dict[str, ResourceUsage] | None:
    """``pulsar_lb_*_usage`` gauges (percent) of a broker's /metrics/ -> resource fields; None
    unless all five are there and finite."""
    out: dict[str, ResourceUsage] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in _GAUGES:
            continue
        try:
            value = float(line.rsplit(" ", 1)[1])
        except (ValueError, IndexError):
            return None
        if not 0 <= value < 1e300:
            return None
        out[_GAUGES[name]] = ResourceUsage(usage=value, limit=100.0)
    return out if len(out) == len(_GAUGES) else None


def read_metadata_channel(store: Any, root: str = METADATA_CHANNEL_ROOT) -> dict[str, bytes]:
    """The PIP-378 table view: bundle -> its JSON at ``<root>/<tenant>/<ns>/<range>``
    (``store``: a :class:`service.zookeeper.metadata.store.ZkStore`)."""
    names = store.walk_ranges(root)
    got = store.get_many([f"{root}/{n}" for n in names])
    return {path[len(root) + 1 :]: raw for path, (raw, _stat) in got.items()}


def owners_of(units: Mapping[str, UnitState]) -> dict[str, Owner]:
    return {
        bundle: Owner(owner, 0, u.version) for bundle, u in units.items() if (owner := u.owner()) is not None
    }


def broker_view(
    registered: LocalBrokerData,
    owned: set[str],
    stats: Mapping[str, NamespaceBundleStats],
    usage: Mapping[str, ResourceUsage],
    updated_ms: int,
) -> LocalBrokerData:
    """A LocalBrokerData for an Extensible broker: its registry URLs, the channel's bundles, the
    topic stats of those bundles, the host usage it last published."""
    last = {b: s for b, s in stats.items() if b in owned}
    return registered.model_copy(
        update={
            **usage,
            "bundles": set(owned),
            "last_stats": last,
            "num_bundles": len(owned),
            "num_topics": sum(s.topics for s in last.values()),
            "num_producers": sum(s.producer_count for s in last.values()),
            "num_consumers": sum(s.consumer_count for s in last.values()),
            "msg_rate_in": sum(s.msg_rate_in for s in last.values()),
            "msg_rate_out": sum(s.msg_rate_out for s in last.values()),
            "msg_throughput_in": sum(s.msg_throughput_in for s in last.values()),
            "msg_throughput_out": sum(s.msg_throughput_out for s in last.values()),
            "last_update": updated_ms,
        },
        deep=True,
    )


class ExtensibleReads:
    """The channel, the brokers' load data and their topic stats, read on a thread.

    ``client_factory(service_url)`` makes a ``pulsar.Client``; ``metadata_children`` and
    ``metadata_get`` read the metadata store (for the PIP-378 table view)."""

    def __init__(
        self,
        admin: PulsarAdmin,
        client_factory: Callable[[str], Any],
        metadata_read: Callable[[str], dict[str, bytes]] | None = None,
        poll_s: float = 2.0,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.admin = admin
        self._client_factory = client_factory
        self._metadata_read = metadata_read
        self.poll_s = poll_s
        self._on_ready = on_ready
        self.table_view = TOPIC_TABLE_VIEW
        self._lock = threading.Lock()
        self._registry: dict[str, LocalBrokerData] = {}
        self._units: dict[str, UnitState] = {}
        self._usage: dict[str, dict[str, ResourceUsage]] = {}
        self._stats: dict[str, dict[str, NamespaceBundleStats]] = {}
        self._views: dict[str, LocalBrokerData] = {}
        self._signatures: dict[str, str] = {}
        self._channel_caught_up = False
        self._stats_read: set[str] = set()
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- what the leader asks ----------------------------------------------------------------------
    def waiting(self) -> str | None:
        """Why the reads are not complete yet (None: they are)."""
        with self._lock:
            if not self._channel_caught_up:
                where = METADATA_CHANNEL_ROOT if self.table_view == METADATA_TABLE_VIEW else CHANNEL_TOPIC
                return f"Extensible brokers: the service-unit state channel ({where}) is not read yet" + (
                    f" ({self._error})" if self._error else ""
                )
            missing = sorted(set(self._registry) - self._stats_read)
            if missing:
                return f"Extensible brokers: no topic stats read yet from {', '.join(missing)}"
        return None

    def view(
        self, registry: Mapping[str, LocalBrokerData]
    ) -> tuple[dict[str, LocalBrokerData], dict[str, Owner]]:
        """The registered brokers with their load, and the channel's owners (the registry as the
        leader's cache read it is remembered for the next reads)."""
        with self._lock:
            self._registry = dict(registry)
            brokers = {b: self._views.get(b, reg) for b, reg in registry.items()}
            return brokers, owners_of(self._units)

    def owners(self) -> dict[str, Owner]:
        """The channel's owners as read so far (the move tick asks every second where moves landed)."""
        with self._lock:
            return owners_of(self._units)

    # ---- the thread --------------------------------------------------------------------------------
    def start(self, table_view: str) -> None:
        if self._thread is not None and self.table_view == table_view:
            return
        self.close()
        self.table_view = table_view
        self._stop = threading.Event()
        with self._lock:
            self._units = {}
            self._channel_caught_up = False
        self._thread = threading.Thread(target=self._run, name="extensible-reads", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _service_url(self) -> str | None:
        tls = any(u.startswith("https") for u in self.admin.urls)
        with self._lock:
            regs = list(self._registry.values())
        urls = [u for r in regs if (u := (r.pulsar_service_url_tls if tls else r.pulsar_service_url))]
        if not urls:
            return None
        hosts = [u.split("://", 1)[1].rstrip("/") for u in sorted(urls)]
        return urls[0].split("://", 1)[0] + "://" + ",".join(hosts)

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self._session()
                backoff = 0.5
            except Exception as e:  # the thread must live: the next session reads again
                with self._lock:
                    self._error = f"{type(e).__name__}: {e}"
                log.warning("reading the Extensible brokers' state failed (%s); again in %.1f s", e, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _session(self) -> None:
        url = self._service_url()
        while url is None:
            if self._stop.wait(0.5):
                return
            url = self._service_url()
        client = self._client_factory(url)
        try:
            import pulsar

            channel = None
            if self.table_view != METADATA_TABLE_VIEW:
                channel = client.create_reader(
                    CHANNEL_TOPIC, pulsar.MessageId.earliest, is_read_compacted=True
                )
            load = client.create_reader(BROKER_LOAD_TOPIC, pulsar.MessageId.latest)
            next_poll = 0.0
            while not self._stop.is_set():
                if channel is not None:
                    self._drain_channel(channel, pulsar)
                else:
                    self._read_metadata_channel()
                self._drain_load(load, pulsar)
                if time.monotonic() >= next_poll:
                    self._poll_stats()
                    next_poll = time.monotonic() + self.poll_s
        finally:
            client.close()

    def _drain_channel(self, reader: Any, pulsar: Any) -> None:
        got: dict[str, UnitState | None] = {}
        for _ in range(10_000):
            try:
                msg = reader.read_next(200)
            except pulsar.Timeout:
                break
            got[str(msg.partition_key())] = parse_unit_state(msg.data())
        # Caught up once nothing is left behind what was read (a busy channel never goes quiet).
        caught_up = not reader.has_message_available()
        self._apply_units(got, replace=False, caught_up=caught_up)

    def _read_metadata_channel(self) -> None:
        assert self._metadata_read is not None
        raw = self._metadata_read(METADATA_CHANNEL_ROOT)
        units = {b: parse_unit_state(v) for b, v in raw.items()}
        self._apply_units(units, replace=True, caught_up=True)
        self._stop.wait(0.5)

    def _apply_units(self, got: Mapping[str, UnitState | None], replace: bool, caught_up: bool) -> None:
        became_ready = False
        with self._lock:
            if replace:
                self._units = {}
            for bundle, unit in got.items():
                if unit is None:
                    self._units.pop(bundle, None)
                else:
                    self._units[bundle] = unit
            if caught_up and not self._channel_caught_up:
                self._channel_caught_up = True
                self._error = None
                became_ready = True
                log.info("Extensible brokers: service-unit state read, %d bundle(s)", len(self._units))
            if got:
                self._rebuild()
        if became_ready and self._on_ready is not None:
            self._on_ready()

    def _drain_load(self, reader: Any, pulsar: Any) -> None:
        for _ in range(1_000):
            try:
                msg = reader.read_next(50)
            except pulsar.Timeout:
                return
            raw = msg.data()
            if not raw:
                # A tombstone: a broker removes its load data whenever one of its bundles is Releasing
                # or Splitting and reports afresh after; its last report stands meanwhile (the strategy
                # knows the broker just moved a bundle).
                continue
            usage = parse_broker_load(raw)
            if usage is None:
                log.info("Extensible broker load data of %r not usable: %r", msg.partition_key(), raw[:200])
                continue
            with self._lock:
                self._usage[str(msg.partition_key())] = usage
                self._rebuild()

    def _poll_stats(self) -> None:
        with self._lock:
            targets = {b: r.web_service_url or f"http://{b}" for b, r in self._registry.items()}
        for broker, url in sorted(targets.items()):
            try:
                doc = self.admin.get_json("/admin/v2/broker-stats/topics", base=url.rstrip("/"))
            except ExecutorError as e:
                log.info("topic stats of %s unreadable: %s", broker, e)
                continue
            stats = sum_topics_per_bundle(doc) if isinstance(doc, dict) else {}
            usage = None if broker in self._usage else self._first_usage(broker, url)
            with self._lock:
                if usage is not None and broker not in self._usage:
                    self._usage[broker] = usage
                self._stats[broker] = stats
                self._stats_read.add(broker)
                self._rebuild()
        became_ready = False
        with self._lock:
            gone = set(self._stats) - set(targets)
            for broker in gone:
                self._stats.pop(broker, None)
                self._stats_read.discard(broker)
            if self._channel_caught_up and not (set(self._registry) - self._stats_read):
                became_ready = True
        if became_ready and self._on_ready is not None:
            self._on_ready()

    def _first_usage(self, broker: str, url: str) -> dict[str, ResourceUsage] | None:
        """Host usage from the broker's gauges, until its first report on the load-data topic (a
        non-persistent topic: an idle broker's next one may be loadBalancerReportUpdateMaxIntervalMinutes
        away, 15 by default)."""
        try:
            text = self.admin.request("GET", "/metrics/", base=url.rstrip("/")).text
        except ExecutorError as e:
            log.info("metrics of %s unreadable: %s", broker, e)
            return None
        return parse_lb_gauges(text)

    def _rebuild(self) -> None:
        """Each broker's LocalBrokerData again (the caller holds the lock); ``lastUpdate`` moves only
        when what it holds changed, so the leader samples a broker once per change, as per report."""
        owned: dict[str, set[str]] = {}
        for bundle, owner in owners_of(self._units).items():
            owned.setdefault(owner.broker, set()).add(bundle)
        now = int(time.time() * 1000)
        for broker, reg in self._registry.items():
            mine = owned.get(broker, set())
            stats = self._stats.get(broker, {})
            usage = self._usage.get(broker, {})
            signature = json.dumps(
                [
                    sorted(mine),
                    {b: s.model_dump() for b, s in sorted(stats.items()) if b in mine},
                    {k: v.model_dump() for k, v in sorted(usage.items())},
                ],
                sort_keys=True,
            )
            if self._signatures.get(broker) == signature and broker in self._views:
                continue
            self._signatures[broker] = signature
            self._views[broker] = broker_view(reg, mine, stats, usage, now)
        for broker in set(self._views) - set(self._registry):
            self._views.pop(broker, None)
            self._signatures.pop(broker, None)
