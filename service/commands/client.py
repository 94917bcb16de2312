"""The REST client every verb shares: its flags (``--url``, ``--token``, ``-o``), the call, the paged
lists (``--page-size``, ``--limit``, ``--cursor``) and the one-line error. The verbs themselves live in
:mod:`service.commands.broker_verbs` (``status``, ``brokers``, ``broker-stats``, ``topics``) and
:mod:`service.commands.bundle_verbs` (``bundles``, ``decisions``, ``unload``, ``split``, ``dry-run``);
what they print is worded in :mod:`service.commands.render`.

Every verb finds its server by ``--url`` (before or after the verb), ``LOADMGR_URL``, the running system
this directory means, else ``http://127.0.0.1:8080`` (:mod:`service.commands.endpoints`). A failure is
one line on stderr; the exit code is 2 for the caller's mistake (an HTTP 4xx: unknown bundle, bad
argument, missing token) and 1 when the server cannot be reached or fails (5xx), as for every other verb
(:mod:`service.commands.cli`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from balancer.errors import ConfigError
from service.commands import argtypes, bundle_args, endpoints
from service.commands.output import add_output_args
from service.commands.render import decision_text, leader_line, move_text, split_text
from service.json_bounds import MAX_HTTP_BYTES, JsonRefused, loads
from service.settings import is_http_url, secret

DEFAULT_URL = endpoints.DEFAULT_URL
EXIT_CALLER, EXIT_SERVER = 2, 1

BUNDLE_HELP = (
    "The bundle: tenant/namespace/0xLOWER_0xUPPER (as `loadmgr bundles` lists it), or tenant/namespace "
    "with --bundle 0xLOWER_0xUPPER (pulsar-admin's form)"
)


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=None,
        help=f"REST base URL (env LOADMGR_URL; default: the running demo's, else {DEFAULT_URL})",
    )
    common.add_argument(
        "--token",
        default=None,
        help="Bearer token (prefer env LOADMGR_API_TOKEN or --token-file: argv shows in ps)",
    )
    common.add_argument(
        "--token-file", default=None, help="File holding the token (env LOADMGR_API_TOKEN_FILE)"
    )
    common.add_argument("--cacert", default=None, help="CA bundle to verify an HTTPS server (env LOADMGR_CA)")
    add_output_args(common)
    return common


def add_bundle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", metavar="BUNDLE|NAMESPACE", help=BUNDLE_HELP)
    p.add_argument(
        "-b", "--bundle", dest="bundle_range", metavar="RANGE", help="0xLOWER_0xUPPER of NAMESPACE"
    )


def add_split_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--algorithm",
        "--split-algorithm",
        "--split-algorithm-name",
        "-san",
        dest="algorithm",
        help="range_equally_divide or specified_positions_divide (with --positions); "
        "topic_count_equally_divide and flow_or_qps_equally_divide need topic names, which only a "
        "leader splitting through Pulsar's admin API has (default: the leader's configured one)",
    )
    p.add_argument(
        "--positions",
        "--split-boundaries",
        dest="positions",
        type=argtypes.hash_positions,
        help="Comma-separated hash positions (specified_positions_divide)",
    )
    p.add_argument(
        "-u", "--unload", action="store_true", help="Also unload the children (pulsar-admin split-bundle -u)"
    )


class ApiError(Exception):
    """A failed call, said in one line: ``HTTP 404 UnknownBundle: no bundle public/default/0x..``."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        super().__init__(error_line(status, body))

    @property
    def exit_code(self) -> int:
        return EXIT_CALLER if 400 <= self.status < 500 else EXIT_SERVER


def _flat(detail: Any) -> str:
    if isinstance(detail, dict):
        msg = detail.get("message") or detail.get("msg")
        rest = {k: v for k, v in detail.items() if k not in ("message", "msg")}
        parts = [_flat(msg)] if msg else []
        parts += [f"{k}={_flat(v)}" for k, v in rest.items()]
        return "; ".join(parts)
    if isinstance(detail, list):
        return "; ".join(_flat(x) for x in detail)
    return " ".join(str(detail).split())


def error_line(status: int, body: Any) -> str:
    if not status:
        return str(body)
    if isinstance(body, dict) and "error" in body:
        detail = _flat(body.get("detail"))
        text = f"{body['error']}: {detail}" if detail else str(body["error"])
    else:
        text = _flat(body) or "(no body)"
    return f"HTTP {status} {text}"[:500]


def _client(args: argparse.Namespace) -> httpx.Client:
    url = endpoints.rest_url(args.url)
    if not is_http_url(url):
        raise ConfigError("--url" if args.url else "LOADMGR_URL", url, "expected an http(s) URL")
    token_file = args.token_file or os.environ.get("LOADMGR_API_TOKEN_FILE")
    token = secret(
        args.token or os.environ.get("LOADMGR_API_TOKEN"),
        Path(token_file) if token_file else None,
        "--token-file",
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    cacert = args.cacert or os.environ.get("LOADMGR_CA")
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=15.0, verify=cacert or True)


def call(args: argparse.Namespace, method: str, path: str, with_headers: bool = False, **kw: Any) -> Any:
    """The answer's JSON (with ``with_headers``: and its headers); ApiError on an HTTP error."""
    try:
        with _client(args) as c:
            r = c.request(method, path, **kw)
    except httpx.HTTPError as e:
        url = endpoints.rest_url(args.url)
        hint = ""
        if url == DEFAULT_URL and not args.url and not os.environ.get("LOADMGR_URL"):
            hint = " (no running demo found: start one with `make run`, or give --url or LOADMGR_URL)"
        raise ApiError(0, f"cannot reach {url}: {e}{hint}") from e
    try:
        body = loads(r.content, max_bytes=MAX_HTTP_BYTES)
    except JsonRefused:
        body = r.text[:2000]
    if r.status_code >= 400:
        raise ApiError(r.status_code, body)
    return (body, r.headers) if with_headers else body


def run_api(args: argparse.Namespace, fn: Any) -> int:
    try:
        return int(fn(args))
    except ApiError as e:
        print(f"loadmgr: {e}", file=sys.stderr)
        return e.exit_code


def paging_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--limit", type=argtypes.positive_int, help=f"At most this many {what} (default: all)")
    p.add_argument(
        "--page-size",
        type=argtypes.positive_int,
        default=PAGE_SIZE,
        help=f"{what.capitalize()} per request (default {PAGE_SIZE}); the pages are followed by cursor",
    )
    p.add_argument("--cursor", help="Start where a previous listing stopped (its next cursor)")


PAGE_SIZE = 1000
NEXT_CURSOR = "X-Next-Cursor"


def paged(a: argparse.Namespace, path: str, params: dict[str, Any], key: str | None = None) -> list[Any]:
    """Every row of a paged list (``limit`` + ``cursor``), up to ``--limit``; when rows are left
    over, the cursor to go on from is printed on stderr."""
    rows: list[Any] = []
    cursor = a.cursor
    while True:
        want = a.page_size if a.limit is None else min(a.page_size, a.limit - len(rows))
        page_params = {**params, "limit": want} | ({"cursor": cursor} if cursor else {})
        body, headers = call(a, "GET", path, params=page_params, with_headers=True)
        rows += body[key] if key is not None else body
        cursor = headers.get(NEXT_CURSOR)
        if cursor is None:
            return rows
        if a.limit is not None and len(rows) >= a.limit:
            print(f"more: --cursor {cursor}", file=sys.stderr)
            return rows


# Names other modules and scripts used before the verbs moved out of this module.
_call = call
_run = run_api
bundle_of = bundle_args.bundle_of
_decision_text = decision_text
__all__ = ["bundle_of", "call", "decision_text", "leader_line", "move_text", "run_api", "split_text"]
