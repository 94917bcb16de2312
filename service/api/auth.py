"""Who is asking: bearer tokens mapped to the ``read`` and ``admin`` roles.

* admin token (``LOADMGR_API_TOKEN`` or ``LOADMGR_API_TOKEN_FILE``): everything, and the only role
  that may change anything: unload, split, PUT /config, and a lookup that has to assign a bundle;
* read token (``LOADMGR_API_READ_TOKEN[_FILE]``): the GET routes and the dry run (which writes nothing);
* reads without a token only when ``LOADMGR_API_READS_OPEN=true``; health probes are always open,
  and so is ``/metrics`` unless ``LOADMGR_API_METRICS_OPEN=false`` (Pulsar's default too).

With no admin token at all the API is open (``anonymous`` acts as admin): ``loadmgr serve`` allows
that only on a loopback address or with ``--insecure``, and says so loudly.

A principal's name is its role plus a short fingerprint of its token, so the decision log can
tell two admin tokens apart without ever holding a token.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.settings import Settings

Role = Literal["read", "admin"]

_bearer = HTTPBearer(
    auto_error=False,
    description="Admin token for mutations; admin or read token for reads unless reads are open",
)


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role

    @property
    def admin(self) -> bool:
        return self.role == "admin"


ANONYMOUS_ADMIN = Principal("anonymous", "admin")  # no token configured: the API is open
ANONYMOUS_READER = Principal("anonymous", "read")  # reads opened explicitly


def fingerprint(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


class Authenticator:
    """Tokens resolved once at start (a token file is read then, not per request)."""

    def __init__(self, settings: Settings) -> None:
        self.admin_token = settings.admin_token()
        self.read_token = settings.read_token()
        self.reads_open = settings.api_reads_open

    @property
    def open(self) -> bool:
        return self.admin_token is None

    def identify(self, token: str | None) -> Principal | None:
        """The principal a presented token proves, or None for a missing or unknown token."""
        if self.admin_token is None:
            return ANONYMOUS_ADMIN
        if not token:
            return None
        # compare against both tokens every time: the timing then says nothing about which matched
        is_admin = hmac.compare_digest(token.encode(), self.admin_token.encode())
        is_read = self.read_token is not None and hmac.compare_digest(
            token.encode(), self.read_token.encode()
        )
        if is_admin:
            return Principal(f"admin {fingerprint(token)}", "admin")
        if is_read:
            return Principal(f"read {fingerprint(token)}", "read")
        return None


def _unauthorized(reason: str) -> HTTPException:
    return HTTPException(status_code=401, detail={"reason": reason}, headers={"WWW-Authenticate": "Bearer"})


def authenticator(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.auth
    return auth


def get_principal(
    request: Request,
    auth: Annotated[Authenticator, Depends(authenticator)],
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Any route but the probes: a read or admin token (or none when reads are open)."""
    token = creds.credentials if creds is not None else None
    who = auth.identify(token)
    if who is None and token is None and auth.reads_open:
        who = ANONYMOUS_READER
    if who is None:
        raise _unauthorized("missing or wrong bearer token" if token is None else "unknown bearer token")
    request.state.principal = who
    return who


def require_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    """Mutations: the admin role only; a valid read token gets 403, not 401, so the caller knows why."""
    if principal is ANONYMOUS_READER:
        raise _unauthorized("missing bearer token: this needs the admin token")
    if not principal.admin:
        raise HTTPException(
            status_code=403, detail={"reason": f"{principal.name} has the read role; this needs admin"}
        )
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]
Reader = Depends(get_principal)
Admin = Depends(require_admin)
