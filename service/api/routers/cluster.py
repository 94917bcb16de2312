"""Cluster-wide resources: topic lookup, the leader, the dynamic configuration, and health."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse

from balancer.bundles import normalize_topic, split_bundle_name, topic_hash, topic_namespace
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput
from service.api import links, views
from service.api.deps import Mutation, PrincipalDep, ServiceDep, SettingsDep
from service.api.schemas import ConfigBody, ErrorBody, Health, Leader, Lookup

router = APIRouter(tags=["cluster"])
health = APIRouter(tags=["health"])


@router.get(
    "/lookup/{topic:path}",
    response_model=Lookup,
    responses={**links.response(links.LOOKUP), 403: {"model": ErrorBody}, 422: {"model": ErrorBody}},
    summary="The broker owning a topic's bundle (assigned through placement if unowned: admin only)",
)
def lookup(topic: str, service: ServiceDep, principal: PrincipalDep) -> dict[str, str]:
    for domain in ("persistent", "non-persistent"):
        # accept Pulsar's REST form /lookup/persistent/tenant/ns/topic as well as the URL form
        if topic.startswith(domain + "/") and not topic.startswith(domain + "://"):
            topic = f"{domain}://{topic[len(domain) + 1 :]}"
    try:
        full = normalize_topic(topic)
    except InvalidInput:
        raise
    except ValueError as e:
        raise InvalidInput("topic", topic, str(e)) from e
    # An unowned bundle is assigned by the lookup, which is a write: only admin may cause it.
    broker = (
        service.lookup(full, principal=principal.name)
        if principal.admin
        else service.lookup(full, assign=False)
    )
    bundle = _bundle_of(service, full)
    return {"topic": full, "bundle": bundle, "broker": broker}


def _bundle_of(service: Any, topic: str) -> str:
    """The bundle of the namespace's current layout whose range holds the topic's hash ("" if none)."""
    h = topic_hash(topic)
    for name in views.layouts(service.view()).get(topic_namespace(topic), []):
        if split_bundle_name(name)[1].includes(h):
            return name
    return ""


@router.get("/leader", response_model=Leader, summary="Who leads, and whether this instance does")
def leader(service: ServiceDep, settings: SettingsDep) -> dict[str, Any]:
    instance = settings.instance_id or f"{settings.http_host}:{settings.http_port}"
    return {"leader": service.leader_info(), "isLeader": bool(service.is_leader()), "instance": instance}


def _config_body(config: LoadBalancerConfig) -> dict[str, Any]:
    return {"values": config.model_dump(mode="json"), "dynamicKeys": sorted(config.dynamic_keys())}


@router.get("/config", response_model=ConfigBody, summary="The effective load-balancer configuration")
def get_config(service: ServiceDep) -> dict[str, Any]:
    return _config_body(service.config)


@router.put(
    "/config",
    response_model=ConfigBody,
    dependencies=[Mutation],
    responses={
        401: {"model": ErrorBody},
        403: {"model": ErrorBody},
        422: {"model": ErrorBody},
        503: {"model": ErrorBody},
    },
    summary="Change dynamic keys (a static key is refused with 422)",
)
def put_config(
    service: ServiceDep, principal: PrincipalDep, updates: Annotated[dict[str, Any], Body()]
) -> dict[str, Any]:
    unknown = sorted(set(updates) - set(LoadBalancerConfig.model_fields))
    if unknown:
        raise InvalidInput(unknown[0], updates[unknown[0]], "unknown configuration key")
    return _config_body(service.update_config(updates, principal=principal.name))


@health.get("/healthz", response_model=Health, summary="Liveness: the process answers")
def healthz() -> dict[str, Any]:
    return {"status": "ok"}


@health.get(
    "/readyz",
    response_model=Health,
    responses={503: {"model": Health}},
    summary="Readiness: connected to ZooKeeper; details say the connection state and why no decisions",
)
def readyz(service: ServiceDep) -> Any:
    details = service.readiness()
    reasons = service.not_ready_reasons()
    if not reasons:
        return {"status": "ready", "details": details}
    return JSONResponse({"status": "not ready", "details": {**details, "reasons": reasons}}, status_code=503)
