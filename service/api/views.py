"""Read-only projections of the runtime's ``ClusterView`` into the API's JSON shapes.

The view is read through a few tolerant accessors so the routers depend on the documented meaning
(brokers' LocalBrokerData, bundle data, ownership, namespace layouts) rather than on field spelling.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.encoders import jsonable_encoder

from balancer.bundles import NamespaceBundles, namespace_of
from balancer.config import LoadBalancerConfig
from balancer.errors import UnknownBroker, UnknownBundle
from balancer.models import BundleData, LocalBrokerData
from service.api.metrics import brokers_of

RESOURCES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
# The resource names as Pulsar's LocalBrokerData JSON spells them: the REST API is camelCase throughout.
RESOURCE_KEYS = {
    "cpu": "cpu",
    "memory": "memory",
    "direct_memory": "directMemory",
    "bandwidth_in": "bandwidthIn",
    "bandwidth_out": "bandwidthOut",
}


def _mapping(view: Any, *names: str) -> Mapping[str, Any]:
    for name in names:
        value = getattr(view, name, None)
        if isinstance(value, Mapping):
            return value
    return {}


def brokers(view: Any) -> dict[str, LocalBrokerData]:
    return brokers_of(view)


def bundle_data(view: Any) -> Mapping[str, BundleData]:
    return _mapping(view, "bundle_data", "bundles")


def owners(view: Any) -> dict[str, str]:
    """bundle -> owning broker: the ownership map, completed by what brokers report they serve."""
    out = {str(k): str(v) for k, v in _mapping(view, "owners", "ownership", "owner").items()}
    for broker, data in brokers(view).items():
        for bundle in data.bundles:
            out.setdefault(bundle, broker)
    return out


def layouts(view: Any) -> dict[str, list[str]]:
    """namespace -> bundle names of its current layout."""
    out: dict[str, list[str]] = {}
    for ns, layout in _mapping(view, "namespaces", "layouts", "namespace_layouts").items():
        if isinstance(layout, NamespaceBundles):
            out[str(ns)] = layout.bundle_names
        elif isinstance(layout, Mapping) and "boundaries" in layout:
            out[str(ns)] = NamespaceBundles.from_texts(str(ns), list(layout["boundaries"])).bundle_names
        elif isinstance(layout, Mapping) and isinstance(layout.get("bundles"), Mapping):
            bounds = layout["bundles"].get("boundaries", [])
            out[str(ns)] = NamespaceBundles.from_texts(str(ns), list(bounds)).bundle_names
        elif isinstance(layout, list | tuple):
            out[str(ns)] = [str(b) for b in layout]
    return out


def recently_unloaded(view: Any) -> Mapping[str, int]:
    return _mapping(view, "recently_unloaded", "recently_unloaded_bundles")


def all_bundles(view: Any) -> list[str]:
    names: set[str] = set(owners(view)) | set(bundle_data(view))
    for bundles in layouts(view).values():
        names.update(bundles)
    return sorted(names)


def strategy_scores(view: Any, config: LoadBalancerConfig) -> dict[str, dict[str, float]]:
    """broker -> strategy -> score: the runtime's own scores when the view carries them, else the
    quantity each Pulsar strategy ranks brokers by, computed from the latest reports."""
    given = _mapping(view, "scores")
    out: dict[str, dict[str, float]] = {}
    weights = config.weights()
    for broker, data in brokers(view).items():
        scores = {
            "OverloadShedder": data.max_resource_usage(),
            "ThresholdShedder": data.max_resource_usage_with_weight(weights, True),
            "UniformLoadShedder.msgRate": data.msg_rate,
            "UniformLoadShedder.msgThroughput": data.msg_throughput,
        }
        extra = given.get(broker)
        if isinstance(extra, Mapping):
            scores.update({str(k): float(v) for k, v in extra.items()})
        out[broker] = scores
    for strategy, per_broker in given.items():
        if strategy not in out and isinstance(per_broker, Mapping):
            for broker, value in per_broker.items():
                if broker in out:
                    out[broker][str(strategy)] = float(value)
    return out


def broker_summary(broker: str, data: LocalBrokerData, scores: Mapping[str, float]) -> dict[str, Any]:
    return {
        "broker": broker,
        "usagePercent": {RESOURCE_KEYS[r]: round(getattr(data, r).percent_usage(), 3) for r in RESOURCES},
        "maxResourceUsage": data.max_resource_usage(),
        "msgRateIn": data.msg_rate_in,
        "msgRateOut": data.msg_rate_out,
        "msgThroughputIn": data.msg_throughput_in,
        "msgThroughputOut": data.msg_throughput_out,
        "numBundles": len(data.bundles) or data.num_bundles,
        "numTopics": data.num_topics,
        "lastUpdate": data.last_update,
        "scores": dict(scores),
    }


def broker_detail(view: Any, broker: str, config: LoadBalancerConfig) -> dict[str, Any]:
    all_brokers = brokers(view)
    if broker not in all_brokers:
        raise UnknownBroker(broker)
    data = all_brokers[broker]
    out = broker_summary(broker, data, strategy_scores(view, config).get(broker, {}))
    own = sorted(b for b, o in owners(view).items() if o == broker)
    out["bundles"] = own
    out["loadReport"] = jsonable_encoder(data.to_json_dict())
    return out


def bundle_summary(view: Any, bundle: str, owner: str | None) -> dict[str, Any]:
    data = bundle_data(view).get(bundle)
    row: dict[str, Any] = {"bundle": bundle, "namespace": namespace_of(bundle), "owner": owner}
    if data is not None:
        short = data.short_term_data
        row.update(
            msgRateIn=short.msg_rate_in,
            msgRateOut=short.msg_rate_out,
            msgThroughputIn=short.msg_throughput_in,
            msgThroughputOut=short.msg_throughput_out,
            topics=data.topics,
        )
    return row


def bundle_detail(view: Any, bundle: str) -> dict[str, Any]:
    known = set(all_bundles(view))
    if bundle not in known:
        raise UnknownBundle(bundle)
    out = bundle_summary(view, bundle, owners(view).get(bundle))
    data = bundle_data(view).get(bundle)
    out["bundleData"] = jsonable_encoder(data.to_json_dict()) if data is not None else None
    unloaded_at = recently_unloaded(view).get(bundle)
    out["recentlyUnloadedAt"] = unloaded_at
    return out


def jsonable(obj: Any) -> Any:
    """Pydantic models, dataclasses and mappings as plain JSON values (camelCase where the model has it)."""
    if hasattr(obj, "to_json_dict"):
        return jsonable_encoder(obj.to_json_dict())
    if hasattr(obj, "model_dump"):
        return jsonable_encoder(obj.model_dump(mode="json"))
    return jsonable_encoder(obj)


def move(m: Any) -> dict[str, Any]:
    """One planned move of a dry run. A cycle's ``Move`` is a slotted class with a lazily built
    explanation, which no generic encoder can see into, so it is spelled out field by field."""
    explanation = getattr(m, "explanation", None)
    return {
        "bundle": getattr(m, "bundle", None),
        "source": getattr(m, "source", None),
        "destination": getattr(m, "destination", None),
        "explanation": jsonable(explanation) if explanation is not None else {},
    }


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def decision(record: Any) -> Any:
    """A decision record with camelCase field names (``timeMs``), like the rest of the API; the
    explanation's numbers are passed through as the deciding code named them."""
    out = jsonable(record)
    if not isinstance(out, dict):
        return out
    return {camel(k): v for k, v in out.items()}
