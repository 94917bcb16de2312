"""What every kazoo call shares: the bytes a node is written as and the errors a call may raise.

``json_bytes`` is the one encoding of a node (sorted keys, no spaces, so equal values are equal
bytes); ``translated`` turns kazoo's exceptions into :mod:`service.errors`: connection problems
become :class:`~service.errors.StoreUnavailable`, lost races :class:`~service.errors.StaleWrite`,
refused credentials or ACLs :class:`~service.errors.ZkAccessDenied`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError

from service.errors import StaleWrite, StoreUnavailable, ZkAccessDenied

V = TypeVar("V")

AUTH_FAILED = "ZooKeeper refused this client's authentication (AUTH_FAILED)"


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Kazoo exceptions -> service errors; everything else passes through."""
    try:
        yield
    except BadVersionError as e:
        raise StaleWrite(f"node changed since it was read: {e!r}") from None
    except AuthFailedError:
        raise ZkAccessDenied(AUTH_FAILED) from None
    except NoAuthError:
        raise ZkAccessDenied("ZooKeeper refused the operation (NoAuth): no ACL grants it") from None
    except (KazooTimeoutError, KazooException) as e:
        if isinstance(e, NoNodeError | NodeExistsError | NotEmptyError):
            raise
        raise StoreUnavailable(f"ZooKeeper unavailable: {type(e).__name__}") from None


@dataclass(frozen=True)
class Versioned(Generic[V]):
    """A value read with the node version a compare-and-set write must present."""

    value: V
    version: int


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
