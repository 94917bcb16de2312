"""``/brokers``: each live broker's load, its score under every strategy, and the bundles it owns;
and the maintenance verbs behind ``loadmgr brokers cordon|uncordon|drain`` (admin token)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException

from service.api import links, views
from service.api.deps import Mutation, PrincipalDep, ServiceDep
from service.api.schemas import (
    BrokerDetail,
    BrokerSummary,
    CordonInfo,
    DrainInfo,
    DrainRequest,
    ErrorBody,
    MaintenanceInfo,
)
from service.leader.maintenance import drain_view

router = APIRouter(prefix="/brokers", tags=["brokers"])
maintenance = APIRouter(tags=["brokers"])

_MUTATION_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},  # not a live broker
    409: {"model": ErrorBody},  # refused by the current state (another drain, the last broker)
    422: {"model": ErrorBody},
    503: {"model": ErrorBody},
}


def _marks(service: Any) -> tuple[set[str], str | None]:
    """Cordoned brokers and the broker being drained (None: no drain running)."""
    cordons = getattr(service, "cordons", None)
    drain = getattr(service, "drain_state", None)
    cordoned = set(cordons()) if callable(cordons) else set()
    state = drain() if callable(drain) else None
    return cordoned, state.broker if state is not None and state.active else None


@router.get(
    "",
    response_model=list[BrokerSummary],
    responses=links.response(links.BROKER_LIST),
    summary="List live brokers with load, scores, and whether each is cordoned or draining",
)
def list_brokers(service: ServiceDep) -> list[dict[str, object]]:
    view = service.view()
    scores = views.strategy_scores(view, service.config)
    cordoned, draining = _marks(service)
    return [
        {
            **views.broker_summary(b, d, scores.get(b, {})),
            "cordoned": b in cordoned,
            "draining": b == draining,
        }
        for b, d in sorted(views.brokers(view).items())
    ]


@maintenance.get(
    "/maintenance",
    response_model=MaintenanceInfo,
    summary="Cordoned brokers and the drain (running or last finished)",
)
def get_maintenance(service: ServiceDep) -> dict[str, Any]:
    out: dict[str, Any] = service.maintenance()
    return out


@router.post(
    "/{broker:path}/cordon",
    response_model=CordonInfo,
    responses=_MUTATION_ERRORS,
    dependencies=[Mutation],
    summary="Cordon a broker: no new bundle goes to it; it keeps what it has",
)
def cordon(broker: str, service: ServiceDep, principal: PrincipalDep) -> dict[str, Any]:
    c = service.cordon(broker, principal=principal.name)
    return {"broker": c.broker, **c.to_json()}


@router.post(
    "/{broker:path}/uncordon",
    response_model=MaintenanceInfo,
    responses=_MUTATION_ERRORS,
    dependencies=[Mutation],
    summary="Uncordon a broker: placement may choose it again",
)
def uncordon(broker: str, service: ServiceDep, principal: PrincipalDep) -> dict[str, Any]:
    service.uncordon(broker, principal=principal.name)
    out: dict[str, Any] = service.maintenance()
    return out


@router.post(
    "/{broker:path}/drain/stop",
    response_model=DrainInfo,
    responses=_MUTATION_ERRORS,
    dependencies=[Mutation],
    summary="Stop the running drain after its bundle in flight (the broker stays cordoned)",
)
def stop_drain(broker: str, service: ServiceDep, principal: PrincipalDep) -> dict[str, Any] | None:
    return drain_view(service.stop_drain(broker, principal=principal.name))


@router.post(
    "/{broker:path}/drain",
    response_model=DrainInfo,
    responses=_MUTATION_ERRORS,
    dependencies=[Mutation],
    summary="Cordon a broker and move its bundles off, one at a time (a stopped drain resumes)",
)
def drain(
    broker: str,
    service: ServiceDep,
    principal: PrincipalDep,
    body: Annotated[DrainRequest | None, Body()] = None,
) -> dict[str, Any] | None:
    req = body or DrainRequest()
    return drain_view(service.drain(broker, then_shutdown=req.then_shutdown, principal=principal.name))


@router.get(
    "/{broker:path}/drain",
    response_model=DrainInfo,
    responses={404: {"model": ErrorBody}},
    summary="The drain of this broker: running, stopped, or its outcome",
)
def get_drain(broker: str, service: ServiceDep) -> dict[str, Any] | None:
    state = service.drain_state()
    if state is None or state.broker != broker:
        raise HTTPException(404, detail={"broker": broker, "reason": "no drain of this broker is recorded"})
    return drain_view(state)


@router.get(
    "/{broker:path}",
    response_model=BrokerDetail,
    responses={**links.response(links.BROKER), 404: {"model": ErrorBody}},
    summary="One broker: load, scores per strategy, owned bundles",
)
def get_broker(broker: str, service: ServiceDep) -> dict[str, object]:
    cordoned, draining = _marks(service)
    detail: dict[str, object] = views.broker_detail(service.view(), broker, service.config)
    return {**detail, "cordoned": broker in cordoned, "draining": broker == draining}
