"""OpenAPI links: which response feeds which operation's parameters.

A link says, in the schema, that a value one operation returns (a broker id in ``GET /brokers``, a
bundle name in ``GET /bundles``, the namespace a ``POST /namespaces/..`` created) is what another
operation takes. Clients and generators follow them; the stateful schemathesis run
(``tests/e2e/test_api_stateful.py``) chains calls through them, so the unload, split and namespace
routes are exercised on things that exist rather than on random names that all answer 404.

Operation ids are the route functions' names (``service.api.app._operation_id``); a test checks every
link names an existing operation and only that operation's parameters.
"""

from __future__ import annotations

from typing import Any

Links = dict[str, dict[str, Any]]


def link(operation_id: str, description: str, body: Any = None, **parameters: str) -> dict[str, Any]:
    """A link to ``operation_id`` filling ``parameters`` (and the request ``body``, expressions nested)."""
    out = {"operationId": operation_id, "description": description, "parameters": parameters}
    if body is not None:
        out["requestBody"] = body
    return out


def _unload(description: str, bundle: str, destination: str) -> dict[str, Any]:
    # the destination in both places the route reads it (the body wins), so neither is left random
    return link(
        "unload_bundle",
        description,
        body={"destinationBroker": destination},
        bundle=bundle,
        destinationBroker=destination,
    )


def response(links: Links, status: int = 200) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entry adding ``links`` to a route's success response."""
    return {status: {"links": links}}


_FIRST_BROKER = "$response.body#/0/broker"
_FIRST_BUNDLE = "$response.body#/0/bundle"

BROKER_LIST: Links = {
    "GetBroker": link("get_broker", "The first listed broker in detail", broker=_FIRST_BROKER),
    "BundlesOfBroker": link("list_bundles", "The bundles the first listed broker owns", broker=_FIRST_BROKER),
}

BROKER: Links = {
    "BundlesOfBroker": link("list_bundles", "This broker's bundles", broker="$response.body#/broker"),
    "GetOwnedBundle": link("get_bundle", "A bundle this broker owns", bundle="$response.body#/bundles/0"),
    "UnloadOwnedBundle": _unload(
        "Unload a bundle of this broker back to it", "$response.body#/bundles/0", "$response.body#/broker"
    ),
}

BUNDLE_LIST: Links = {
    "GetBundle": link("get_bundle", "The first listed bundle in detail", bundle=_FIRST_BUNDLE),
    "UnloadBundle": _unload(
        "Move the first listed bundle to the second one's owner", _FIRST_BUNDLE, "$response.body#/1/owner"
    ),
    "SplitBundle": link("split_bundle", "Split the first listed bundle", bundle=_FIRST_BUNDLE),
    "OwnerOfBundle": link("get_broker", "The first listed bundle's owner", broker="$response.body#/0/owner"),
}

BUNDLE: Links = {
    "UnloadBundle": _unload(
        "Unload this bundle to its owner", "$response.body#/bundle", "$response.body#/owner"
    ),
    "SplitBundle": link("split_bundle", "Split this bundle", bundle="$response.body#/bundle"),
    "SplitBundleInTwo": link(
        "split_bundle",
        "Split this bundle's range in two",
        body={"algorithm": "range_equally_divide"},
        bundle="$response.body#/bundle",
    ),
    "OwnerOfBundle": link("get_broker", "This bundle's owner", broker="$response.body#/owner"),
    "BundlesOfNamespace": link(
        "list_bundles", "The bundles of this bundle's namespace", namespace="$response.body#/namespace"
    ),
}

MUTATED_BUNDLE: Links = {
    "GetBundle": link("get_bundle", "The bundle after the change", bundle="$request.path.bundle"),
}

LOOKUP: Links = {
    "GetBundle": link("get_bundle", "The topic's bundle", bundle="$response.body#/bundle"),
    "GetBroker": link("get_broker", "The topic's broker", broker="$response.body#/broker"),
}

NAMESPACE_LIST: Links = {
    "BundlesOfNamespace": link(
        "list_bundles", "The first listed namespace's bundles", namespace="$response.body#/0/namespace"
    ),
}

_SAME_NAMESPACE = {"tenant": "$request.path.tenant", "namespace": "$request.path.namespace"}

CREATED_NAMESPACE: Links = {
    "SetPolicies": link("set_policies", "Set the new namespace's policies", **_SAME_NAMESPACE),
    "DeleteNamespace": link("delete_namespace", "Delete the new namespace", **_SAME_NAMESPACE),
    "BundlesOfNamespace": link(
        "list_bundles", "The new namespace's bundles", namespace="$response.body#/namespace"
    ),
}

NAMESPACE: Links = {
    "DeleteNamespace": link("delete_namespace", "Delete the namespace", **_SAME_NAMESPACE),
}
