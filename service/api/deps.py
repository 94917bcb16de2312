"""Dependencies shared by the routers: the running service, the settings, and who is asking."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from service.api.auth import Admin, Principal, PrincipalDep, Reader, require_admin
from service.settings import Settings

__all__ = ["Admin", "Mutation", "Principal", "PrincipalDep", "Reader", "ServiceDep", "SettingsDep"]


def get_service(request: Request) -> Any:
    return request.app.state.service


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


ServiceDep = Annotated[Any, Depends(get_service)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
AdminDep = Annotated[Principal, Depends(require_admin)]
# every mutating route carries this: the admin role (a read token gets 403, no token 401)
Mutation = Admin
