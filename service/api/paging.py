"""Paging of the list endpoints (``/bundles``, ``/decisions``): ``limit`` and an opaque ``cursor``.

A page answers with the cursor of the next one in the ``X-Next-Cursor`` header (and an RFC 8288
``Link: <...>; rel="next"``), absent on the last page; ``/decisions`` also puts it in its body
(``nextCursor``). The cursor is the position after the last row returned, so rows added or removed
meanwhile never make a page repeat or skip a row that stays. A cursor that is not one this API
returned is refused (422) with the field named.
"""

from __future__ import annotations

import base64
import binascii

from fastapi import Request, Response

from balancer.errors import InvalidInput

NEXT_CURSOR_HEADER = "X-Next-Cursor"
MAX_LIMIT = 10_000


def encode_cursor(kind: str, position: str) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{position}".encode()).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str) -> str:
    """The position inside ``cursor``; InvalidInput naming ``cursor`` when it is not one of ``kind``."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    got, sep, position = text.partition(":")
    if got != kind or not sep or not position:
        raise InvalidInput("cursor", cursor, f"not a {kind} cursor this API returned")
    return position


def announce_next(request: Request, response: Response, cursor: str | None) -> None:
    """Put the next page's cursor in the headers (nothing on the last page)."""
    if cursor is None:
        return
    response.headers[NEXT_CURSOR_HEADER] = cursor
    url = request.url.include_query_params(cursor=cursor)
    response.headers["Link"] = f'<{url}>; rel="next"'
