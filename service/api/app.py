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
from service.api.auth import Authenticator, Reader
from service.api.guard import install_guard
from service.api.routers import brokers, bundles, cluster, namespaces, shedding
from service.api.schemas import ErrorBody
from service.settings import Settings

API_DESCRIPTION = """Live load manager for Apache-Pulsar-style broker clusters.

Reads are served by every instance. Mutations (unload, split, PUT /config, and a lookup that has to
assign a bundle) run on the leader: a follower forwards them, only to a leader whose identity it can
verify. Mutations need the admin token (`Authorization: Bearer <token>`); reads need the admin or the
read token unless reads were opened (`LOADMGR_API_READS_OPEN`). `/healthz` and `/readyz` are open.
"""


# Every route behind the token check may answer 401 (no or unknown token).
READER_ERRORS: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody}}


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
    app.state.auth = Authenticator(settings)
    errors.install(app)
    for router in (
        brokers.router,
        brokers.maintenance,
        bundles.router,
        cluster.router,
        namespaces.router,
        shedding.router,
    ):
        app.include_router(router, dependencies=[Reader], responses=READER_ERRORS)
    app.include_router(cluster.health)  # probes carry no token
    install_guard(app, settings)
    if registry is not None:
        _add_metrics(app, registry)
    return app


def _add_metrics(app: FastAPI, registry: CollectorRegistry) -> None:
    # A plain route rather than a mounted ASGI app: a mount answers /metrics with a redirect to /metrics/.
    # Like Pulsar (authenticateMetricsEndpoint=false), /metrics is open unless configured otherwise:
    # scrapers rarely carry tokens, and the numbers are the same ones the dashboards show.
    guard = [] if app.state.settings.api_metrics_open else [Reader]

    @app.get("/metrics", include_in_schema=False, dependencies=guard)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
