"""``/bundles``: ownership and traffic of bundles, and the two bundle mutations (unload, split)."""

from __future__ import annotations

import bisect
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response

from balancer.bundles import namespace_of
from balancer.errors import InvalidInput, UnknownNamespace
from service.api import links, paging, views
from service.api.deps import Mutation, PrincipalDep, ServiceDep
from service.api.schemas import BundleDetail, BundleSummary, ErrorBody, SplitRequest, UnloadRequest

router = APIRouter(prefix="/bundles", tags=["bundles"])

_MUTATION_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},
    409: {"model": ErrorBody},  # a lost compare-and-set; an unload to the current owner
    412: {"model": ErrorBody},  # Pulsar's answer to a split it cannot do (algorithm, range)
    422: {"model": ErrorBody},
    503: {"model": ErrorBody},
}


@router.get(
    "",
    response_model=list[BundleSummary],
    responses={**links.response(links.BUNDLE_LIST), 404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
    summary="List bundles, optionally by namespace (404 for one that has no bundles) or broker",
)
def list_bundles(
    service: ServiceDep,
    request: Request,
    response: Response,
    namespace: Annotated[str | None, Query(description="tenant/namespace")] = None,
    broker: Annotated[str | None, Query(description="owning broker id")] = None,
    limit: Annotated[
        int | None, Query(ge=1, le=paging.MAX_LIMIT, description="at most this many bundles (default: all)")
    ] = None,
    cursor: Annotated[
        str | None, Query(description=f"where to go on: a previous page's {paging.NEXT_CURSOR_HEADER} header")
    ] = None,
) -> list[dict[str, Any]]:
    """Bundles in name order; with ``limit``, one page, and the next page's cursor in the
    ``X-Next-Cursor`` and ``Link`` headers (absent on the last page)."""
    view = service.view()
    owners = views.owners(view)
    names = views.all_bundles(view)  # sorted by name
    if namespace is not None:
        _known_namespace(namespace, names)
    start = 0 if cursor is None else bisect.bisect_right(names, paging.decode_cursor("bundle", cursor))
    rows: list[dict[str, Any]] = []
    for bundle in names[start:]:
        owner = owners.get(bundle)
        if namespace is not None and namespace_of(bundle) != namespace:
            continue
        if broker is not None and owner != broker:
            continue
        if limit is not None and len(rows) >= limit:
            paging.announce_next(request, response, paging.encode_cursor("bundle", rows[-1]["bundle"]))
            break
        rows.append(views.bundle_summary(view, bundle, owner))
    return rows


def _known_namespace(namespace: str, names: list[str]) -> None:
    """A namespace filter that can match nothing is the caller's mistake, said as one (an empty list
    would read as "this namespace has no bundles"): InvalidInput for a malformed name, UnknownNamespace
    for one without bundles."""
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        raise InvalidInput("namespace", namespace, "expected tenant/namespace, e.g. public/default")
    if not any(namespace_of(b) == namespace for b in names):
        raise UnknownNamespace(namespace)


@router.post(
    "/{bundle:path}/unload",
    responses={**links.response(links.MUTATED_BUNDLE), **_MUTATION_ERRORS},
    dependencies=[Mutation],
    summary="Unload a bundle, optionally to a destination broker",
)
def unload_bundle(
    bundle: str,
    service: ServiceDep,
    principal: PrincipalDep,
    body: Annotated[UnloadRequest | None, Body()] = None,
    destination_broker: Annotated[str | None, Query(alias="destinationBroker", min_length=1)] = None,
) -> dict[str, Any]:
    destination = (body.destination_broker if body is not None else None) or destination_broker
    record = service.unload(bundle, destination, principal=principal.name)
    return {"decision": views.decision(record)}


@router.post(
    "/{bundle:path}/split",
    responses={**links.response(links.MUTATED_BUNDLE), **_MUTATION_ERRORS},
    dependencies=[Mutation],
    summary="Split a bundle with an algorithm (and positions for specified_positions_divide)",
)
def split_bundle(
    bundle: str,
    service: ServiceDep,
    principal: PrincipalDep,
    body: Annotated[SplitRequest | None, Body()] = None,
) -> dict[str, Any]:
    req = body or SplitRequest()
    record = service.split(bundle, req.algorithm, req.positions, unload=req.unload, principal=principal.name)
    return {"decision": views.decision(record)}


@router.get(
    "/{bundle:path}",
    response_model=BundleDetail,
    responses={**links.response(links.BUNDLE), 404: {"model": ErrorBody}},
    summary="One bundle: owner and short/long-term data",
)
def get_bundle(bundle: str, service: ServiceDep) -> dict[str, Any]:
    return views.bundle_detail(service.view(), bundle)
