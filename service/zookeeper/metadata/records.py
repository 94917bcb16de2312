"""Pulsar's records checked one by one: each ``parse_*`` takes a node's validated JSON (see
:mod:`service.zookeeper.session.validate`) and returns the record or raises (BadNode, pydantic's
ValidationError); :meth:`~service.zookeeper.session.nodes.JsonZk.parse_node` turns that into "skipped,
logged once, counted". Also the size check of a broker report against ``jute.maxbuffer``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from balancer.bundles import NamespaceBundles
from balancer.errors import InvalidInput
from balancer.models import BundleData, LocalBrokerData, ResourceQuota
from service.zookeeper.session.validate import JAVA_LONG_MAX, BadNode, finite_number


@dataclass(frozen=True)
class Owner:
    """Who owns a bundle: the broker id, and the ZooKeeper session holding the ephemeral node."""

    broker: str
    session_id: int
    version: int


@dataclass(frozen=True)
class Assignment:
    """The leader's intent for a bundle: which broker should own it, and why."""

    broker: str
    source: str | None
    reason: str
    time_ms: int


# ---- record checks: each raises (BadNode, pydantic's ValidationError) on a bad document -------------
# A float32's largest value: Pulsar computes resource percentages in float, so a usage or limit
# beyond it is no number a broker can have measured.
F32_MAX = 3.4028234663852886e38
RATES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")


def parse_broker_report(doc: Any) -> LocalBrokerData:
    """LocalBrokerData with Pulsar's checks: a JSON object, finite resource numbers within float range."""
    if not isinstance(doc, dict):
        raise BadNode(f"load report is a JSON {type(doc).__name__}, not an object")
    data = LocalBrokerData.model_validate(doc)
    if not (
        data.web_service_url
        or data.web_service_url_tls
        or data.pulsar_service_url
        or data.pulsar_service_url_tls
    ):
        # A broker publishes where it serves; a report naming no URL (``{}``) is nobody to send bundles to.
        raise BadNode("load report names no webServiceUrl or pulsarServiceUrl")
    for name in ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out"):
        res = getattr(data, name)
        finite_number(res.usage, f"{name}.usage", -F32_MAX, F32_MAX)
        finite_number(res.limit, f"{name}.limit", -F32_MAX, F32_MAX)
    # Rates are bounded well inside double range: the leader sums and averages thousands of them,
    # and a sum that overflows to Infinity would poison every bundle-data node it reaches.
    for name in RATES:
        finite_number(getattr(data, name), name, 0.0, F32_MAX)
    for bundle, stats in data.last_stats.items():
        for name in RATES:
            finite_number(getattr(stats, name), f"lastStats.{bundle[:80]}.{name}", 0.0, F32_MAX)
    if not 0 <= data.last_update <= JAVA_LONG_MAX:
        raise BadNode(f"lastUpdate = {data.last_update} is not a time")
    return data


def parse_bundle_data(doc: Any) -> BundleData:
    """BundleData whose windows can be averaged: ``maxSamples`` >= 1 (the average divides by the
    sample count, capped by it), ``numSamples`` within [0, maxSamples], rates finite and >= 0."""
    if not isinstance(doc, dict):
        raise BadNode(f"bundle data is a JSON {type(doc).__name__}, not an object")
    data = BundleData.model_validate(doc)
    for name, window in (("shortTermData", data.short_term_data), ("longTermData", data.long_term_data)):
        if not 1 <= window.max_samples <= 1_000_000:
            raise BadNode(f"{name}.maxSamples = {window.max_samples} is outside [1, 1000000]")
        if not 0 <= window.num_samples <= window.max_samples:
            raise BadNode(f"{name}.numSamples = {window.num_samples} is outside [0, maxSamples]")
        for rate in RATES:
            finite_number(getattr(window, rate), f"{name}.{rate}", 0.0, F32_MAX)
    if data.topics < 0:
        raise BadNode(f"topics = {data.topics} is negative")
    return data


def parse_layout(namespace: str, doc: Any) -> NamespaceBundles:
    """A namespace's bundle layout from its local-policies document (``bundles`` member required)."""
    if not isinstance(doc, dict):
        raise BadNode(f"local policies are a JSON {type(doc).__name__}, not an object")
    if not isinstance(doc.get("bundles"), dict):
        raise BadNode("local policies without a 'bundles' object")
    try:
        return NamespaceBundles.from_policies(namespace, doc["bundles"])
    except InvalidInput as e:
        raise BadNode(f"bad bundle layout: {e}") from None


def parsed_as_is(a: Assignment) -> bool:
    """``a`` passes every check ``parse_assignment`` makes of its own document, so a read of the
    node would decode to an equal value."""
    t = a.time_ms
    return (
        type(a.broker) is str
        and a.broker != ""
        and (a.source is None or type(a.source) is str)
        and type(a.reason) is str
        and type(t) is int
        and 0 <= t <= JAVA_LONG_MAX
    )


def parse_assignment(doc: Any) -> Assignment:
    """loadmgr's assignment ``{"broker", "source", "reason", "time"}``: every member type-checked."""
    if not isinstance(doc, dict) or not isinstance(doc.get("broker"), str) or not doc["broker"]:
        raise BadNode("assignment without a broker")
    source = doc.get("source")
    if source is not None and not isinstance(source, str):
        raise BadNode(f"assignment source = {str(source)[:40]!r} is not a broker id")
    reason = doc.get("reason", "")
    if not isinstance(reason, str):
        raise BadNode(f"assignment reason = {str(reason)[:40]!r} is not a string")
    t = doc.get("time", 0)
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= JAVA_LONG_MAX:
        raise BadNode(f"assignment time = {str(t)[:40]!r} is not epoch milliseconds")
    return Assignment(doc["broker"], source, reason, t)


def parse_quota(doc: Any) -> ResourceQuota:
    """ResourceQuota with finite, non-negative rates (placement divides by and sums them)."""
    if not isinstance(doc, dict):
        raise BadNode(f"resource quota is a JSON {type(doc).__name__}, not an object")
    quota = ResourceQuota.model_validate(doc)
    for name, value in quota.model_dump().items():
        if isinstance(value, float):
            finite_number(value, name, 0.0, F32_MAX)
    return quota


def parse_owner(doc: Any) -> str:
    """The broker named by an ownership node.

    Our agents write ``brokerId``; a Pulsar broker only URLs, so fall back to the web URL's host:port."""
    if not isinstance(doc, dict):
        raise BadNode("ownership data is not a JSON object")
    if isinstance(doc.get("brokerId"), str) and doc["brokerId"]:
        return str(doc["brokerId"])
    url = doc.get("httpUrl") or doc.get("nativeUrl")
    if isinstance(url, str) and "://" in url:
        return url.split("://", 1)[1].rstrip("/")
    raise BadNode("ownership data names no broker")


def owner_doc(broker_id: str, urls: dict[str, str]) -> dict[str, Any]:
    """An agent's ownership node: Pulsar's NamespaceEphemeralData (nativeUrl, httpUrl, disabled,
    advertisedListeners). Pulsar derives the owner from httpUrl, so ``brokerId`` is added only when
    the web URL does not name ``broker_id`` (an agent given another --pulsar-url)."""
    doc: dict[str, Any] = {**urls, "disabled": False, "advertisedListeners": {}}
    try:
        named: str | None = parse_owner(doc)
    except BadNode:
        named = None
    if named != broker_id:
        doc["brokerId"] = broker_id
    return doc


# ZooKeeper refuses a request larger than jute.maxbuffer (server default 0xfffff bytes). A broker
# report carries every bundle's stats (~300 bytes each), so ~3,000 bundles on one broker reach it.
JUTE_MAXBUFFER = 0xFFFFF
REPORT_WARN_FRACTION = 0.8


def report_size_warning(broker_id: str, size: int, bundles: int, limit: int = JUTE_MAXBUFFER) -> str | None:
    """A warning when a broker report nears ``jute.maxbuffer`` (None while it is comfortably below)."""
    if size < REPORT_WARN_FRACTION * limit:
        return None
    return (
        f"load report of {broker_id} is {size} bytes for {bundles} bundle(s), "
        f"{100 * size / limit:.0f}% of ZooKeeper's jute.maxbuffer ({limit} bytes): past it the report "
        "cannot be written; raise jute.maxbuffer on servers and clients, or spread the bundles"
    )
