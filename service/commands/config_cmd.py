"""``loadmgr config show``: the load-balancer configuration in force, with its defaults.

When a load manager answers at ``--url`` (or ``LOADMGR_URL``), the configuration shown is the one
its leader runs with, dynamic updates included; only when none answers is it the configuration this
machine would start with (defaults, ``LOADMGR_*`` environment, ``--broker-conf``). The first line
says which.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import httpx

from balancer.config import LoadBalancerConfig, describe
from service.commands import argtypes
from service.json_bounds import loads
from service.settings import Settings

DEFAULT_URL = "http://127.0.0.1:8080"
# Short: `config show` must still answer at once from local settings when nothing is running.
LEADER_TIMEOUT_S = 2.0


def register(sub: Any) -> None:
    p = sub.add_parser("config", help="Show the load-balancer configuration in force")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION")
    csub.required = True
    show = csub.add_parser(
        "show",
        help="Every key, its value, default and whether it is dynamic: the running leader's if one "
        "answers at --url, else this machine's",
    )
    show.add_argument("--url", default=None, help=f"REST base URL (env LOADMGR_URL, default {DEFAULT_URL})")
    show.add_argument("--local", action="store_true", help="Do not ask a running leader; show local settings")
    show.add_argument(
        "--broker-conf",
        type=argtypes.readable_text_file,
        help="A Pulsar broker.conf to read keys from (local settings)",
    )
    show.add_argument("--json", action="store_true", help="Print JSON")
    show.set_defaults(func=_show)
    put = csub.add_parser(
        "set",
        help="Change dynamic keys cluster-wide (PUT /config): the leader persists them in ZooKeeper "
        "(/loadmgr/config) and every instance applies them; they survive restarts and failover",
    )
    put.add_argument(
        "assignments", nargs="+", metavar="KEY=VALUE", help="e.g. loadBalancerSheddingIntervalMinutes=2"
    )
    put.add_argument("--url", default=None, help=f"REST base URL (env LOADMGR_URL, default {DEFAULT_URL})")
    put.add_argument("--token", default=None, help=argparse.SUPPRESS)
    put.add_argument(
        "--token-file", default=None, help="File holding the admin token (env LOADMGR_API_TOKEN_FILE)"
    )
    put.add_argument("--cacert", default=None, help="CA bundle to verify an HTTPS server (env LOADMGR_CA)")
    put.add_argument("--json", action="store_true", help="Print the JSON answer")
    put.set_defaults(func=_set)


def leader_config(url: str) -> tuple[LoadBalancerConfig, str] | None:
    """The leader's configuration and a line naming it, or None when no leader answers."""
    try:
        with httpx.Client(base_url=url.rstrip("/"), timeout=LEADER_TIMEOUT_S) as c:
            leader = loads(c.get("/leader").content)
            who = leader.get("leader") or {}
            base = url if leader.get("isLeader") else who.get("serviceUrl")
            if not base:
                return None
            body = loads(c.get(base.rstrip("/") + "/config").content)
        config = LoadBalancerConfig.from_dict(body["values"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        # Nothing running, or something else answering there: fall back to the local settings.
        return None
    return config, f"# configuration of the running leader {who.get('brokerId', '?')} at {base}"


def _show(args: argparse.Namespace) -> int:
    from service.commands.endpoints import rest_url

    url = rest_url(args.url)  # --url, LOADMGR_URL, a running demo, else the default
    found = None if args.local or args.broker_conf else leader_config(url)
    if found is not None:
        config, source = found
    else:
        settings = Settings() if args.broker_conf is None else Settings(broker_conf=args.broker_conf)
        config = settings.load_balancer_config(dict(os.environ))
        why = "" if args.local or args.broker_conf else f"; no load manager answered at {url}"
        source = f"# local configuration (defaults, LOADMGR_* environment, --broker-conf){why}"
    rows = describe(config)
    if args.json:
        print(source, file=sys.stderr)
        print(json.dumps({r["key"]: r["value"] for r in rows}, indent=2))
        return 0
    print(source)
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        mark = "" if r["value"] == r["default"] else "  (default " + json.dumps(r["default"]) + ")"
        dyn = "dynamic" if r["dynamic"] else "static "
        print(f"{r['key']:<{width}}  {dyn}  {json.dumps(r['value'])}{mark}")
    return 0


def parse_assignments(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` words -> a dict (ConfigError naming the word that is not one)."""
    from balancer.errors import ConfigError

    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                "KEY=VALUE", item, "expected KEY=VALUE, e.g. loadBalancerSheddingIntervalMinutes=2"
            )
        out[key.strip()] = value.strip()
    return out


def _set(args: argparse.Namespace) -> int:
    from service.commands.client import ApiError, call

    updates = parse_assignments(args.assignments)
    try:
        body = call(args, "PUT", "/config", json=updates)
    except ApiError as e:
        print(f"loadmgr: {e}", file=sys.stderr)
        return e.exit_code  # 2 for any HTTP 4xx (the caller's), 1 when nothing answers or the server fails
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    values = body.get("values", {}) if isinstance(body, dict) else {}
    for key in sorted(updates):
        print(f"{key} = {json.dumps(values.get(key))} (persisted in ZooKeeper, applied cluster-wide)")
    return 0
