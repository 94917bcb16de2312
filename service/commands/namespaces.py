"""``loadmgr namespaces create|list|delete|policies``: namespace administration on ZooKeeper.

The nodes written are Pulsar's own (:mod:`service.zookeeper.metadata.namespaces`), so what ``pulsar-admin
namespaces create``, ``set-anti-affinity-group`` and ``ns-isolation-policy set`` would leave behind
is what a standalone loadmgr cluster gets, without kazoo.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

from service.settings import Settings


def register(sub: Any) -> None:
    p = sub.add_parser("namespaces", help="Create, list, delete namespaces and set their policies")
    p.add_argument("--zk", help="ZooKeeper connection string (LOADMGR_ZK_HOSTS)")
    p.add_argument("--chroot", help="ZooKeeper chroot (LOADMGR_ZK_CHROOT)")
    nsub = p.add_subparsers(dest="namespaces_command", metavar="ACTION")
    nsub.required = True
    c = nsub.add_parser("create", help="Create a namespace (pulsar-admin namespaces create)")
    c.add_argument("namespace", help="tenant/namespace")
    c.add_argument("--bundles", type=int, default=4, help="Initial bundle count (default 4)")
    c.add_argument("--cluster", help="Replication cluster (default LOADMGR_CLUSTER)")
    c.add_argument("--anti-affinity-group", help="namespaceAntiAffinityGroup")
    c.set_defaults(func=_create)
    ls = nsub.add_parser("list", help="Namespaces with their bundle count and anti-affinity group")
    ls.add_argument("--json", action="store_true", help="Print JSON")
    ls.set_defaults(func=_list)
    d = nsub.add_parser("delete", help="Delete a namespace: its policies, layout and bundle data")
    d.add_argument("namespace")
    d.set_defaults(func=_delete)
    pol = nsub.add_parser("policies", help="Set a namespace's anti-affinity group or isolation policy")
    pol.add_argument("namespace")
    group = pol.add_mutually_exclusive_group()
    group.add_argument("--anti-affinity-group", help="Set namespaceAntiAffinityGroup")
    group.add_argument("--no-anti-affinity-group", action="store_true", help="Remove the group")
    pol.add_argument("--isolation-policy", help="Name of an isolation policy to set for this namespace")
    pol.add_argument("--primary", action="append", default=[], help="Primary broker host regex (repeat)")
    pol.add_argument("--secondary", action="append", default=[], help="Secondary broker host regex (repeat)")
    pol.add_argument("--min-limit", type=int, default=1, help="Use secondaries below this many primaries")
    pol.add_argument("--cluster", help="Cluster of the isolation policy (default LOADMGR_CLUSTER)")
    pol.set_defaults(func=_policies)


def _admin(args: argparse.Namespace) -> Any:
    from service.zookeeper.metadata.namespaces import NamespaceAdmin
    from service.zookeeper.metadata.store import ZkStore

    overrides = {k: v for k, v in (("zk_hosts", args.zk), ("zk_chroot", args.chroot)) if v is not None}
    settings = Settings(**overrides)
    # loadmgr's identity, ACL and TLS, as `serve` uses them: the nodes it creates are loadmgr's
    store = ZkStore.from_settings(settings)
    store.start(timeout_s=settings.zk_session_timeout_s)
    return NamespaceAdmin(store), settings


@contextlib.contextmanager
def quiet_kazoo(level: str) -> Iterator[None]:
    """Kazoo's own retries ("Connection dropped: ...") are not for an operator running one command:
    its one-line error says what happened. They show with LOADMGR_LOG_LEVEL=DEBUG."""
    logger = logging.getLogger("kazoo")
    before = logger.level
    if level.upper() != "DEBUG":
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(before)


def _run(args: argparse.Namespace, fn: Any) -> int:
    from balancer.errors import LoadMgrError

    with quiet_kazoo(Settings().log_level):
        try:
            admin, settings = _admin(args)
        except LoadMgrError as e:
            print(f"loadmgr: {e}", file=sys.stderr)
            return 2
        try:
            return int(fn(admin, settings))
        except (LoadMgrError, KeyError) as e:
            print(f"loadmgr: {e}", file=sys.stderr)
            return 1
        finally:
            admin.store.stop()


def _create(args: argparse.Namespace) -> int:
    def go(admin: Any, settings: Settings) -> int:
        layout = admin.create(
            args.namespace, args.bundles, args.cluster or settings.cluster or None, args.anti_affinity_group
        )
        print(f"created {args.namespace} with {len(layout.ranges)} bundles")
        return 0

    return _run(args, go)


def _list(args: argparse.Namespace) -> int:
    def go(admin: Any, settings: Settings) -> int:
        rows = admin.list()
        if args.json:
            doc = {
                r.namespace: {"bundles": r.bundles, "namespaceAntiAffinityGroup": r.anti_affinity_group}
                for r in rows
            }
            print(json.dumps(doc, indent=2))
            return 0
        for r in rows:
            group = f"  antiAffinityGroup={r.anti_affinity_group}" if r.anti_affinity_group else ""
            print(f"{r.namespace}  bundles={r.bundles}{group}")
        return 0

    return _run(args, go)


def _delete(args: argparse.Namespace) -> int:
    def go(admin: Any, settings: Settings) -> int:
        admin.delete(args.namespace)
        print(f"deleted {args.namespace}")
        return 0

    return _run(args, go)


def _policies(args: argparse.Namespace) -> int:
    from balancer.errors import InvalidInput

    def go(admin: Any, settings: Settings) -> int:
        if args.anti_affinity_group or args.no_anti_affinity_group:
            admin.set_anti_affinity_group(args.namespace, args.anti_affinity_group)
            print(f"{args.namespace}: namespaceAntiAffinityGroup={args.anti_affinity_group or '(none)'}")
        if args.isolation_policy:
            cluster = args.cluster or settings.cluster
            if not cluster:
                raise InvalidInput("--cluster", cluster, "an isolation policy belongs to a cluster")
            if not args.primary:
                raise InvalidInput("--primary", args.primary, "an isolation policy needs primary brokers")
            admin.isolate(
                cluster, args.isolation_policy, args.namespace, args.primary, args.secondary, args.min_limit
            )
            print(f"{cluster}: isolation policy {args.isolation_policy} set for {args.namespace}")
        return 0

    return _run(args, go)
