"""Dependencies shared by the routers: the running service, the settings, and the mutation token."""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.settings import Settings

_bearer = HTTPBearer(auto_error=False, description="Required for mutations when LOADMGR_API_TOKEN is set")


def get_service(request: Request) -> Any:
    return request.app.state.service


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def require_token(
    settings: Annotated[Settings, Depends(get_settings)],
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Refuse a mutation without the configured bearer token (none configured: open)."""
    expected = settings.api_token
    if not expected:
        return
    given = creds.credentials if creds is not None else ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            status_code=401,
            detail={"reason": "missing or wrong bearer token"},
            headers={"WWW-Authenticate": "Bearer"},
        )


ServiceDep = Annotated[Any, Depends(get_service)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
Mutation = Depends(require_token)
