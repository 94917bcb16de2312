"""The one parse boundary for JSON that comes from outside: ZooKeeper nodes and HTTP bodies.

Python's ``json`` recurses once per nesting level, so a few kilobytes of ``[`` raise RecursionError
wherever they are parsed: a node in ZooKeeper or an answer from a broker could crash whatever read
it, ``serve`` at start-up included. Everything read from ZooKeeper (:mod:`service.zookeeper.session.validate`)
and every JSON body read over HTTP (Pulsar's admin API, the CLI's answers from loadmgr, request
bodies reaching the REST API) goes through :func:`loads`, which refuses text larger than
``max_bytes`` or nested deeper than ``max_depth`` before any parser sees it, and turns every other
failure into :class:`JsonRefused` with a one-line reason.
"""

from __future__ import annotations

import json
import re
from typing import Any

# ZooKeeper's default jute.maxbuffer: nothing larger can come from a default server.
MAX_BYTES = 1024 * 1024
# An HTTP answer may carry a whole cluster's listing (bundles, decisions): larger, still bounded.
MAX_HTTP_BYTES = 64 * 1024 * 1024
# Pulsar's records and loadmgr's answers nest a handful of levels; 32 leaves room for foreign
# members while staying far below Python's recursion limit.
MAX_DEPTH = 32
# A JSON string literal, escapes included: removed before counting brackets, which it may contain.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPENERS = frozenset(b"[{")
_CLOSERS = frozenset(b"]}")


class JsonRefused(ValueError):
    """Text that is not acceptable JSON; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_depth(raw: bytes, limit: int = MAX_DEPTH) -> None:
    """Raise JsonRefused if arrays/objects in ``raw`` nest deeper than ``limit``; never parses."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return  # cannot nest deeper than the number of openers: the common case costs two scans
    depth = 0
    for ch in _STRING.sub(b"", raw):
        if ch in _OPENERS:
            depth += 1
            if depth > limit:
                raise JsonRefused(f"JSON nested deeper than {limit} levels")
        elif ch in _CLOSERS:
            depth -= 1


def loads(
    raw: bytes | str | None,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    **hooks: Any,
) -> Any:
    """The JSON value of ``raw`` (None for empty input), or JsonRefused saying why not.

    ``hooks`` go to :func:`json.loads` (``parse_float``, ``parse_int``, ``parse_constant``); a
    JsonRefused (or any ValueError) a hook raises is reported as the reason."""
    if raw is None or len(raw) == 0:
        return None
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise JsonRefused(f"{len(data)} bytes, more than the {max_bytes}-byte limit")
    check_depth(data, max_depth)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonRefused(f"not UTF-8 at byte {e.start}") from None
    try:
        return json.loads(text, **hooks)
    except JsonRefused:
        raise
    except json.JSONDecodeError as e:
        raise JsonRefused(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:  # the depth check makes this unreachable; kept as the last line of defence
        raise JsonRefused("JSON nested too deeply") from None
    except ValueError as e:  # a hook's own refusal
        raise JsonRefused(str(e)[:200]) from None
