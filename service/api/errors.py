"""Exception handlers: domain errors to HTTP status codes, and mutations on a follower sent to the leader.

A mutation that reaches a follower is forwarded to the leader's REST URL (same method, path, query,
body and Authorization header) so clients need not know who leads; if the leader is unknown,
unverified or unreachable the answer is 503 with what is known about the leader. The URL comes from
the service only after :class:`~service.leader.identity.LeaderIdentity` verified the leader node;
HTTPS certificates are verified (``http_tls_ca``), redirects are not followed and the wait is short,
so the caller's token goes to the verified leader or nowhere.
"""

from __future__ import annotations

import logging
import math
from http import HTTPStatus
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from balancer.errors import (
    AlreadyExists,
    Conflict,
    InvalidInput,
    PreconditionFailed,
    UnknownBroker,
    UnknownBundle,
    UnknownNamespace,
)
from service.errors import (
    AdminRequired,
    BundleBusy,
    ExecutorError,
    FencedOut,
    NotLeader,
    StaleWrite,
    StoreUnavailable,
)

log = logging.getLogger(__name__)

FORWARDED_HEADER = "x-loadmgr-forwarded"
# A frozen leader (stopped process, stalled host) still completes TCP handshakes from the kernel's
# backlog and then never answers: without a short bound the caller waits as long as its own client
# allows. A move or split on a healthy leader answers well within it; a 503 LeaderUnreachable with
# Retry-After tells the caller to try again once the election has replaced the frozen leader.
FORWARD_TIMEOUT = httpx.Timeout(5.0, connect=1.0)
# Origin and cookies stay behind: this follower already judged the Origin, and the leader is another
# origin, which would look like a cross-site request there.
_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "origin", "cookie"}


def _error(status: int, error: str, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=status, headers=headers)


def leader_url_of(exc: BaseException) -> str | None:
    for attr in ("leader_url", "url", "api_url", "leader_api_url"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and value:
            return value.rstrip("/")
    return None


async def _forward(request: Request, leader_url: str) -> Response:
    settings = request.app.state.settings
    verify: str | bool = str(settings.http_tls_ca) if settings.http_tls_ca is not None else True
    body = await request.body()
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
    headers[FORWARDED_HEADER] = "1"
    url = leader_url + request.url.path
    async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT, verify=verify, follow_redirects=False) as client:
        upstream = await client.request(
            request.method,
            url,
            params=list(request.query_params.multi_items()),
            content=body,
            headers=headers,
        )
    passthrough = {
        k: v for k, v in upstream.headers.items() if k.lower() in {"content-type", "www-authenticate"}
    }
    passthrough["x-loadmgr-served-by"] = leader_url
    return Response(upstream.content, status_code=upstream.status_code, headers=passthrough)


def install(app: FastAPI) -> None:
    @app.exception_handler(UnknownBundle)
    async def _unknown_bundle(_: Request, exc: UnknownBundle) -> JSONResponse:
        return _error(404, "UnknownBundle", {"bundle": str(exc), "reason": "no namespace layout contains it"})

    @app.exception_handler(UnknownNamespace)
    async def _unknown_namespace(_: Request, exc: UnknownNamespace) -> JSONResponse:
        return _error(
            404,
            "UnknownNamespace",
            {"namespace": str(exc.args[0]) if exc.args else "", "reason": "does not exist"},
        )

    @app.exception_handler(AlreadyExists)
    async def _exists(_: Request, exc: AlreadyExists) -> JSONResponse:
        # Pulsar's admin answers a create of an existing namespace with 409 Conflict.
        detail = [{"field": exc.field, "value": _plain(exc.value), "reason": exc.reason}]
        return _error(409, "AlreadyExists", detail)

    @app.exception_handler(Conflict)
    async def _conflict(_: Request, exc: Conflict) -> JSONResponse:
        detail = [{"field": exc.field, "value": _plain(exc.value), "reason": exc.reason}]
        return _error(409, "Conflict", detail)

    @app.exception_handler(UnknownBroker)
    async def _unknown_broker(_: Request, exc: UnknownBroker) -> JSONResponse:
        return _error(404, "UnknownBroker", {"broker": str(exc), "reason": "not among the live brokers"})

    @app.exception_handler(InvalidInput)
    async def _invalid(_: Request, exc: InvalidInput) -> JSONResponse:
        detail = [{"field": exc.field, "value": _plain(exc.value), "reason": exc.reason}]
        return _error(422, type(exc).__name__, detail)

    @app.exception_handler(PreconditionFailed)
    async def _precondition(_: Request, exc: PreconditionFailed) -> JSONResponse:
        # Pulsar's admin API answers these with 412 Precondition Failed; tools check the status.
        detail = [{"field": exc.field, "value": _plain(exc.value), "reason": exc.reason}]
        return _error(412, "PreconditionFailed", detail)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [
            {
                "field": ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body",
                "reason": e.get("msg", "invalid"),
                "loc": list(e.get("loc", ())),
                "type": e.get("type"),
            }
            for e in exc.errors()
        ]
        return _error(422, "ValidationError", detail)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> Response:
        # Every error body has the documented shape (ErrorBody: error + detail), the token checks'
        # 401/403 and an unknown route's 404 included.
        if exc.status_code == 400:
            # FastAPI's answer to a body it cannot even decode (not UTF-8): the same failure as a
            # body that is not JSON, which it reports as a 422 validation error.
            detail = [
                {"field": "body", "reason": "body is not JSON text", "loc": ["body"], "type": "json_invalid"}
            ]
            return _error(422, "ValidationError", detail)
        if exc.status_code in (204, 304):
            return Response(status_code=exc.status_code, headers=exc.headers)
        try:
            name = HTTPStatus(exc.status_code).phrase.replace(" ", "").replace("-", "")
        except ValueError:
            name = "HTTPError"
        return _error(exc.status_code, name, exc.detail, headers=dict(exc.headers or {}))

    @app.exception_handler(AdminRequired)
    async def _admin_required(_: Request, exc: AdminRequired) -> JSONResponse:
        return _error(403, "AdminRequired", {"reason": str(exc)})

    @app.exception_handler(NotLeader)
    async def _not_leader(request: Request, exc: NotLeader) -> Response:
        url = leader_url_of(exc)
        if url is None or request.headers.get(FORWARDED_HEADER):
            return _error(
                503,
                "NoLeader",
                {"reason": str(exc) or "no leader is known to serve this mutation", "leader": url},
                headers={"Retry-After": "2"},
            )
        try:
            return await _forward(request, url)
        except httpx.HTTPError as e:
            log.warning("forwarding %s %s to leader %s failed: %s", request.method, request.url.path, url, e)
            return _error(
                503,
                "LeaderUnreachable",
                {"reason": str(e) or type(e).__name__, "leader": url},
                headers={"Retry-After": "2"},
            )

    @app.exception_handler(StoreUnavailable)
    async def _store(_: Request, exc: StoreUnavailable) -> JSONResponse:
        return _error(
            503,
            "StoreUnavailable",
            {"reason": str(exc) or "ZooKeeper is unavailable"},
            headers={"Retry-After": "2"},
        )

    @app.exception_handler(FencedOut)
    async def _fenced_out(_: Request, exc: FencedOut) -> JSONResponse:
        # Not a lost race on one node: this instance stopped leading while serving the request.
        # Nothing was written; the client retries and reaches whoever leads next.
        return _error(
            503,
            "NoLeader",
            {"reason": f"this instance is no longer the leader ({exc}); nothing was written", "leader": None},
            headers={"Retry-After": "2"},
        )

    @app.exception_handler(StaleWrite)
    async def _stale(_: Request, exc: StaleWrite) -> JSONResponse:
        return _error(409, "StaleWrite", {"reason": str(exc)})

    @app.exception_handler(BundleBusy)
    async def _busy(_: Request, exc: BundleBusy) -> JSONResponse:
        return _error(409, "BundleBusy", {"reason": str(exc)})

    @app.exception_handler(ExecutorError)
    async def _executor(_: Request, exc: ExecutorError) -> JSONResponse:
        # a refusal by the broker side is the caller's conflict; anything else is an upstream failure
        status = 409 if exc.status in (409, 412) else 502
        return _error(status, "ExecutorError", {"reason": str(exc), "upstreamStatus": exc.status})


def _plain(value: Any) -> Any:
    """The offending value as JSON can carry it: NaN and Infinity (which JSON cannot) and anything
    that is not a scalar become their text, cut to 200 characters so an error never echoes a flood."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) < 2**63:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
