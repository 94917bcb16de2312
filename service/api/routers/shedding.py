"""``/shedding/dry-run`` and ``/decisions``: what the leader would do now, and what it did."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from balancer.errors import InvalidInput
from service.api import paging, views
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
    """``schedule``: when each move would go under the disruption budget (which now, which wait and
    why), given the moves queued and in flight."""
    schedule = None
    if hasattr(service, "dry_run_schedule"):
        plan, schedule = service.dry_run_schedule()
    else:
        plan = service.dry_run()
    shedding = getattr(plan, "shedding", None)
    return {
        "moves": [views.move(m) for m in getattr(plan, "moves", [])],
        "skipped": [views.jsonable(s) for s in getattr(plan, "skipped", [])],
        "shedding": views.jsonable(shedding) if shedding is not None else None,
        "schedule": schedule,
        "changed": False,
    }


@router.get(
    "/decisions",
    response_model=DecisionList,
    responses={422: {"model": ErrorBody}},  # a bad filter, limit or cursor
    summary="Recent shedding, placement, split, manual and long-term adoption decisions",
)
def decisions(
    service: ServiceDep,
    request: Request,
    response: Response,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    kind: DecisionKind | None = None,
    broker: Annotated[
        str | None, Query(description="decisions moving a bundle from or to this broker")
    ] = None,
    namespace: Annotated[
        str | None, Query(description="decisions about bundles of this tenant/namespace")
    ] = None,
    cursor: Annotated[str | None, Query(description="a previous page's nextCursor: older decisions")] = None,
) -> dict[str, Any]:
    """Newest first; ``nextCursor`` (also the ``X-Next-Cursor`` header) pages on to older ones."""
    before = None if cursor is None else _decision_id(paging.decode_cursor("decision", cursor), cursor)
    rows: list[dict[str, Any]] = []
    next_cursor = None
    # The log is a bounded ring (decision_log_size): filtering all of it is cheap.
    for record in service.decisions(limit=DECISION_SCAN, kind=kind):
        d = views.decision(record)
        ident = d.get("id")
        if before is not None and (not isinstance(ident, int) or ident >= before):
            continue
        if broker is not None and broker not in (d.get("source"), d.get("destination")):
            continue
        bundle = d.get("bundle")
        if namespace is not None and not (isinstance(bundle, str) and bundle.startswith(namespace + "/")):
            continue
        if len(rows) >= limit:
            last = rows[-1].get("id")
            next_cursor = paging.encode_cursor("decision", str(last)) if isinstance(last, int) else None
            break
        rows.append(d)
    paging.announce_next(request, response, next_cursor)
    return {"decisions": rows, "nextCursor": next_cursor}


DECISION_SCAN = 1_000_000  # more than any decision log holds


def _decision_id(position: str, cursor: str) -> int:
    if not position.isdigit():
        raise InvalidInput("cursor", cursor, "not a decision cursor this API returned")
    return int(position)
