"""The FastAPI application every loadmgr instance serves (leader and followers alike).

The service object's lifecycle belongs to the caller (``loadmgr serve`` or the demo): the app only
reads from it and forwards mutations, so it can be built around any object with the runtime's
methods, including a fake in tests.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from service.api import errors
from service.api.routers import brokers, bundles, cluster, namespaces, shedding
from service.settings import Settings

API_DESCRIPTION = """Live load manager for Apache-Pulsar-style broker clusters.

Reads are served by every instance. Mutations (unload, split, PUT /config) run on the leader: a
follower forwards them. When `LOADMGR_API_TOKEN` is set, mutations need `Authorization: Bearer <token>`.
"""


def _operation_id(route: APIRoute) -> str:
    return route.name


def create_app(service: Any, settings: Settings, registry: CollectorRegistry | None = None) -> FastAPI:
    """Build the app around a running ``LoadManagerService``; ``registry`` is exposed at ``/metrics``."""
    app = FastAPI(
        title="loadmgr",
        version="0.1.0",
        description=API_DESCRIPTION,
        generate_unique_id_function=_operation_id,
    )
    app.state.service = service
    app.state.settings = settings
    errors.install(app)
    for router in (
        brokers.router,
        bundles.router,
        cluster.router,
        namespaces.router,
        shedding.router,
        cluster.health,
    ):
        app.include_router(router)
    if registry is not None:
        _add_metrics(app, registry)
    return app


def _add_metrics(app: FastAPI, registry: CollectorRegistry) -> None:
    # A plain route rather than a mounted ASGI app: a mount answers /metrics with a redirect to /metrics/.
    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
