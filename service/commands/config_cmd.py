"""``loadmgr config show``: the effective load-balancer config with its defaults."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from balancer.config import describe
from service.commands import argtypes
from service.settings import Settings


def register(sub: Any) -> None:
    p = sub.add_parser("config", help="Show the effective load-balancer configuration")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION")
    csub.required = True
    show = csub.add_parser("show", help="Print every key, its value, default and whether it is dynamic")
    show.add_argument(
        "--broker-conf", type=argtypes.readable_text_file, help="A Pulsar broker.conf to read keys from"
    )
    show.add_argument("--json", action="store_true", help="Print JSON")
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    settings = Settings() if args.broker_conf is None else Settings(broker_conf=args.broker_conf)
    config = settings.load_balancer_config(dict(os.environ))
    rows = describe(config)
    if args.json:
        print(json.dumps({r["key"]: r["value"] for r in rows}, indent=2))
        return 0
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        mark = "" if r["value"] == r["default"] else "  (default " + json.dumps(r["default"]) + ")"
        dyn = "dynamic" if r["dynamic"] else "static "
        print(f"{r['key']:<{width}}  {dyn}  {json.dumps(r['value'])}{mark}")
    return 0
