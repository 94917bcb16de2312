"""``/brokers``: each live broker's load, its score under every strategy, and the bundles it owns."""

from __future__ import annotations

from fastapi import APIRouter

from service.api import links, views
from service.api.deps import ServiceDep
from service.api.schemas import BrokerDetail, BrokerSummary, ErrorBody

router = APIRouter(prefix="/brokers", tags=["brokers"])


@router.get(
    "",
    response_model=list[BrokerSummary],
    responses=links.response(links.BROKER_LIST),
    summary="List live brokers with load and scores",
)
def list_brokers(service: ServiceDep) -> list[dict[str, object]]:
    view = service.view()
    scores = views.strategy_scores(view, service.config)
    return [views.broker_summary(b, d, scores.get(b, {})) for b, d in sorted(views.brokers(view).items())]


@router.get(
    "/{broker:path}",
    response_model=BrokerDetail,
    responses={**links.response(links.BROKER), 404: {"model": ErrorBody}},
    summary="One broker: load, scores per strategy, owned bundles",
)
def get_broker(broker: str, service: ServiceDep) -> dict[str, object]:
    return views.broker_detail(service.view(), broker, service.config)
