"""Checks made before any route runs: Host, Origin of state-changing requests, and body size.

* Host: a server on a loopback address answers only to loopback names, so a web page cannot reach
  it through DNS rebinding (a hostile name resolving to 127.0.0.1); elsewhere ``allowed_hosts``
  lists the names served (empty or ``*``: any).
* Origin: a browser attaches ``Origin`` to cross-site POST/PUT/PATCH/DELETE; such a request is
  refused unless the origin is this server itself or listed in ``allowed_origins``. Tokens travel
  in ``Authorization``, which browsers never add on their own, so this matters most for a server
  run without a token; it costs nothing otherwise. Clients that are not browsers send no Origin.
* Size: a body over ``max_request_bytes`` gets 413 before any route parses it; chunked bodies are
  counted as they arrive (the limit bounds what is buffered, too).
* Depth: a JSON body nested deeper than :data:`service.json_bounds.MAX_DEPTH` gets 422 before any
  route parses it (the same bound as every JSON loadmgr reads from ZooKeeper or a broker).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI

from service.json_bounds import JsonRefused, check_depth
from service.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """``name`` of a Host header ``name[:port]`` (IPv6 literals keep no brackets)."""
    return (urlsplit("//" + value).hostname or "").lower()


def _split(text: str) -> set[str]:
    return {part.strip().lower().rstrip("/") for part in text.split(",") if part.strip()}


class RequestGuard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.max_bytes = settings.max_request_bytes
        hosts = _split(settings.allowed_hosts)
        if "*" in hosts:
            self.hosts: set[str] | None = None
        elif hosts:
            self.hosts = {host_name(h) for h in hosts}
        elif is_loopback(settings.http_host):
            self.hosts = set(LOOPBACK_NAMES)
        else:
            self.hosts = None
        self.origins = _split(settings.allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._check(scope["method"], headers, scope.get("scheme", "http"))
        if refusal is not None:
            await _reject(send, *refusal)
            return
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _reject(send, 413, "RequestTooLarge", f"body over {self.max_bytes} bytes")
            return
        body: list[Message] = []
        size = 0
        while True:  # buffer the (bounded) body so a chunked upload is counted too
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([*body, message], receive), send)
                return
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await _reject(send, 413, "RequestTooLarge", f"body over {self.max_bytes} bytes")
                return
            body.append(message)
            if not message.get("more_body", False):
                break
        if "json" in headers.get("content-type", "") or not headers.get("content-type"):
            try:  # the JSON boundary's depth bound, before any route's parser recurses into it
                check_depth(b"".join(m.get("body", b"") for m in body))
            except JsonRefused as e:
                await _reject(send, 422, "ValidationError", f"body: {e.reason}")
                return
        await self.app(scope, _replay(body, receive), send)

    def _check(self, method: str, headers: dict[str, str], scheme: str) -> tuple[int, str, str] | None:
        host = headers.get("host", "")
        if self.hosts is not None and host_name(host) not in self.hosts:
            return 421, "HostNotAllowed", f"Host {host!r} is not served here (allowed_hosts)"
        origin = headers.get("origin")
        if method in UNSAFE_METHODS and origin is not None:
            same = origin.lower().rstrip("/") == f"{scheme}://{host}".lower()
            if not same and origin.lower().rstrip("/") not in self.origins:
                return 403, "OriginNotAllowed", f"cross-origin {method} from {origin!r} refused"
        return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    queue = list(messages)

    async def replay() -> Message:
        return queue.pop(0) if queue else await receive()

    return replay


async def _reject(send: Send, status: int, error: str, reason: str) -> None:
    body = json.dumps({"error": error, "detail": {"reason": reason}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def install_guard(app: FastAPI, settings: Settings) -> None:
    app.add_middleware(RequestGuard, settings=settings)
