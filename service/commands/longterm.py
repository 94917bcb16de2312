"""``loadmgr longterm``: recompute bundles' long-term traffic from the history with Spark.

Exit codes: 0 done, 2 bad arguments or nodes ZooKeeper's ACL refused (the others are merged), 3 the
history range is missing or empty, 4 ZooKeeper unreachable
(the results are written to ``--out`` before ZooKeeper is contacted).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from service.longterm.job import add_arguments

    p = sub.add_parser(
        "longterm",
        help="Recompute long-term bundle data and broker capacity from the load history (Spark)",
        description="Reads a time range of the history, computes per-bundle long-term traffic and per-broker "
        "capacity, writes them as Parquet and merges longTermData into /loadbalance/bundle-data.",
        epilog="Exit codes: 0 done, 2 bad arguments or nodes refused by ZooKeeper's ACL (the rest merged),"
        " 3 history range missing or empty,"
        " 4 ZooKeeper unreachable.",
    )
    add_arguments(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import logging

    from service.longterm.job import execute

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return execute(args)
