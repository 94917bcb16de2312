"""``/shedding/dry-run`` and ``/decisions``: what the leader would do now, and what it did."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from service.api import views
from service.api.deps import ServiceDep
from service.api.schemas import DecisionKind, DecisionList, DryRun, ErrorBody

router = APIRouter(tags=["shedding"])


@router.post(
    "/shedding/dry-run",
    response_model=DryRun,
    responses={503: {"model": ErrorBody}},
    summary="What the shedding strategy would unload now and where, changing nothing",
)
def dry_run(service: ServiceDep) -> dict[str, Any]:
    plan = service.dry_run()
    shedding = getattr(plan, "shedding", None)
    return {
        "moves": [views.move(m) for m in getattr(plan, "moves", [])],
        "skipped": [views.jsonable(s) for s in getattr(plan, "skipped", [])],
        "shedding": views.jsonable(shedding) if shedding is not None else None,
        "changed": False,
    }


@router.get(
    "/decisions",
    response_model=DecisionList,
    summary="Recent shedding, placement, split, manual and long-term adoption decisions",
)
def decisions(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    kind: DecisionKind | None = None,
) -> dict[str, Any]:
    return {"decisions": [views.decision(d) for d in service.decisions(limit=limit, kind=kind)]}
