"""``/namespaces``: namespace administration, writing Pulsar's own nodes (as ``loadmgr namespaces``).

Any instance may serve these: they are plain compare-and-set writes of Pulsar's admin nodes, not
leader decisions; the leader picks the result up on its next refresh.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path

from balancer.errors import InvalidInput, UnknownNamespace
from service.api import links
from service.api.deps import Mutation, ServiceDep
from service.api.schemas import CreateNamespaceRequest, ErrorBody, NamespacePoliciesRequest, NamespaceRow

router = APIRouter(prefix="/namespaces", tags=["namespaces"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    404: {"model": ErrorBody},
    409: {"model": ErrorBody},
    422: {"model": ErrorBody},
    503: {"model": ErrorBody},
}
# Pulsar's NamedEntity characters (the admin checks the same); in the schema, so clients and
# generators know a valid name before asking.
NAME_PATTERN = r"^[-=:.A-Za-z0-9_]+$"
Tenant = Annotated[str, Path(description="Tenant", pattern=NAME_PATTERN)]
Namespace = Annotated[str, Path(description="Namespace within the tenant", pattern=NAME_PATTERN)]


def _admin(service: Any) -> Any:
    return service.namespaces()  # a NamespaceAdmin on the service's ZooKeeper session


def _cluster(service: Any, requested: str | None) -> str | None:
    return requested or service.settings.cluster or None


@router.get(
    "",
    response_model=list[NamespaceRow],
    responses=links.response(links.NAMESPACE_LIST),
    summary="Namespaces, bundle counts, anti-affinity groups",
)
def list_namespaces(service: ServiceDep) -> list[dict[str, Any]]:
    return [
        {"namespace": r.namespace, "bundles": r.bundles, "namespaceAntiAffinityGroup": r.anti_affinity_group}
        for r in _admin(service).list()
    ]


@router.post(
    "/{tenant}/{namespace}",
    status_code=201,
    response_model=NamespaceRow,
    responses={**links.response(links.CREATED_NAMESPACE, 201), **_ERRORS},
    dependencies=[Mutation],
    summary="Create a namespace (pulsar-admin namespaces create)",
)
def create_namespace(
    tenant: Tenant,
    namespace: Namespace,
    service: ServiceDep,
    body: Annotated[CreateNamespaceRequest | None, Body()] = None,
) -> dict[str, Any]:
    req = body or CreateNamespaceRequest()
    name = f"{tenant}/{namespace}"
    bundles = req.bundles or service.config.defaultNumberOfNamespaceBundles
    layout = _admin(service).create(
        name, bundles, _cluster(service, req.cluster), req.namespace_anti_affinity_group
    )
    return {
        "namespace": name,
        "bundles": len(layout.ranges),
        "namespaceAntiAffinityGroup": req.namespace_anti_affinity_group,
    }


@router.delete(
    "/{tenant}/{namespace}",
    status_code=204,
    responses=_ERRORS,
    dependencies=[Mutation],
    summary="Delete a namespace: policies, layout, bundle data",
)
def delete_namespace(tenant: Tenant, namespace: Namespace, service: ServiceDep) -> None:
    _admin(service).delete(f"{tenant}/{namespace}")


@router.put(
    "/{tenant}/{namespace}/policies",
    response_model=NamespaceRow,
    responses={**links.response(links.NAMESPACE), **_ERRORS},
    dependencies=[Mutation],
    summary="Set the anti-affinity group and/or an isolation policy for the namespace",
)
def set_policies(
    tenant: Tenant, namespace: Namespace, body: NamespacePoliciesRequest, service: ServiceDep
) -> dict[str, Any]:
    name = f"{tenant}/{namespace}"
    admin = _admin(service)
    if body.namespace_anti_affinity_group is not None:
        admin.set_anti_affinity_group(name, body.namespace_anti_affinity_group or None)
    iso = body.isolation_policy
    if iso is not None:
        cluster = _cluster(service, iso.cluster)
        if cluster is None:
            raise InvalidInput("isolationPolicy.cluster", None, "an isolation policy belongs to a cluster")
        admin.isolate(cluster, iso.name, name, iso.primary, iso.secondary, iso.min_limit)
    row = next((r for r in admin.list() if r.namespace == name), None)
    if row is None:
        raise UnknownNamespace(name)
    return {"namespace": name, "bundles": row.bundles, "namespaceAntiAffinityGroup": row.anti_affinity_group}
