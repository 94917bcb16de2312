"""The OpenAPI links of the REST schema: each names a real operation and only its parameters, with a
runtime expression that can resolve (a body pointer, or a path parameter the source really has)."""

from __future__ import annotations

from typing import Any

from service.api.app import create_app
from service.settings import Settings


def _operations(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {op["operationId"]: op for item in spec["paths"].values() for op in item.values()}


def test_every_link_targets_an_operation_and_its_parameters() -> None:
    spec = create_app(object(), Settings()).openapi()
    ops = _operations(spec)
    seen: set[tuple[str, str]] = set()
    for source_id, source in ops.items():
        source_path = {p["name"] for p in source.get("parameters", []) if p["in"] == "path"}
        for status, response in source["responses"].items():
            for name, link in response.get("links", {}).items():
                assert status.startswith("2"), (source_id, status)  # links leave success responses only
                target = ops[link["operationId"]]
                params = {p["name"] for p in target.get("parameters", [])}
                assert link["parameters"] and set(link["parameters"]) <= params, (source_id, name)
                for expr in link["parameters"].values():
                    if expr.startswith("$request.path."):
                        assert expr.removeprefix("$request.path.") in source_path, (source_id, expr)
                    else:
                        assert expr.startswith("$response.body#/"), (source_id, expr)
                seen.add((source_id, link["operationId"]))
    # the producer -> consumer chains the stateful run relies on
    for edge in [
        ("list_brokers", "get_broker"),
        ("list_bundles", "unload_bundle"),
        ("list_bundles", "split_bundle"),
        ("get_bundle", "get_broker"),
        ("create_namespace", "delete_namespace"),
        ("create_namespace", "set_policies"),
        ("unload_bundle", "get_bundle"),
    ]:
        assert edge in seen, edge
