"""``loadmgr namespaces``: namespace administration, and pulsar-admin's bundle verbs.

``create|list|delete|policies`` write Pulsar's own nodes (:mod:`service.zookeeper.metadata.namespaces`),
so what ``pulsar-admin namespaces create``, ``set-anti-affinity-group`` and ``ns-isolation-policy set`` would
leave behind is what a standalone loadmgr cluster gets. They go through the REST API (``/namespaces``)
when one is named (``--url``, ``LOADMGR_URL``) or a ``loadmgr demo`` is running, else straight to
ZooKeeper (``--zk``, ``LOADMGR_ZK_HOSTS``). ``unload`` and ``split-bundle`` are pulsar-admin's
``namespaces unload <ns> --bundle R -d B`` and ``namespaces split-bundle <ns> --bundle R
--split-algorithm A -u``, over REST.

Exit codes as everywhere: 2 for the caller's mistake (unknown or existing namespace, bad argument),
1 when ZooKeeper or the server cannot be reached.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from service.commands import argtypes, bundle_verbs, client, endpoints, zk_probe
from service.commands.bundle_args import bundle_of
from service.commands.output import emit, table
from service.settings import Settings


def register(sub: Any) -> None:
    p = sub.add_parser(
        "namespaces",
        help="Create, list, delete namespaces and set their policies; unload and split-bundle (pulsar-admin)",
    )
    _zk_args(p, None)
    nsub = p.add_subparsers(dest="namespaces_command", metavar="ACTION")
    nsub.required = True
    rest = client.common_parser()  # --url, --token, -o ...
    # --zk and --chroot are taken after the action too (`namespaces list --zk X`), as every other flag
    _zk_args(rest, argparse.SUPPRESS)
    c = nsub.add_parser("create", parents=[rest], help="Create a namespace (pulsar-admin namespaces create)")
    c.add_argument("namespace", help="tenant/namespace")
    c.add_argument("--bundles", type=int, default=4, help="Initial bundle count (default 4)")
    c.add_argument("--cluster", help="Replication cluster (default LOADMGR_CLUSTER)")
    c.add_argument("--anti-affinity-group", help="namespaceAntiAffinityGroup")
    c.set_defaults(func=_create)
    ls = nsub.add_parser(
        "list", parents=[rest], help="Namespaces with their bundle count and anti-affinity group"
    )
    ls.set_defaults(func=_list)
    d = nsub.add_parser(
        "delete", parents=[rest], help="Delete a namespace: its policies, layout and bundle data"
    )
    d.add_argument("namespace", help="tenant/namespace")
    d.set_defaults(func=_delete)
    pol = nsub.add_parser(
        "policies", parents=[rest], help="Set a namespace's anti-affinity group or isolation policy"
    )
    pol.add_argument("namespace", help="tenant/namespace")
    group = pol.add_mutually_exclusive_group()
    group.add_argument("--anti-affinity-group", help="Set namespaceAntiAffinityGroup")
    group.add_argument("--no-anti-affinity-group", action="store_true", help="Remove the group")
    pol.add_argument("--isolation-policy", help="Name of an isolation policy to set for this namespace")
    pol.add_argument("--primary", action="append", default=[], help="Primary broker host regex (repeat)")
    pol.add_argument("--secondary", action="append", default=[], help="Secondary broker host regex (repeat)")
    pol.add_argument("--min-limit", type=int, default=1, help="Use secondaries below this many primaries")
    pol.add_argument("--cluster", help="Cluster of the isolation policy (default LOADMGR_CLUSTER)")
    pol.set_defaults(func=_policies)
    b = nsub.add_parser(
        "bundles", parents=[rest], help="A namespace's bundles and owners (pulsar-admin namespaces bundles)"
    )
    b.add_argument("namespace", help="tenant/namespace")
    b.set_defaults(func=_bundles)
    u = nsub.add_parser(
        "unload",
        parents=[rest],
        help="Unload a bundle: namespaces unload NS --bundle 0x.._0x.. [-d BROKER] (pulsar-admin)",
    )
    u.add_argument("bundle", metavar="NAMESPACE", help="tenant/namespace (or a full bundle name)")
    u.add_argument("-b", "--bundle", dest="bundle_range", metavar="RANGE", help="0xLOWER_0xUPPER")
    u.add_argument(
        "-d", "--destinationBroker", "--destination", dest="destination", help="Destination broker"
    )
    u.set_defaults(func=_unload)
    s = nsub.add_parser(
        "split-bundle",
        parents=[rest],
        help="Split a bundle: namespaces split-bundle NS --bundle 0x.._0x.. [--split-algorithm A] [-u]",
    )
    s.add_argument("bundle", metavar="NAMESPACE", help="tenant/namespace (or a full bundle name)")
    s.add_argument("-b", "--bundle", dest="bundle_range", metavar="RANGE", help="0xLOWER_0xUPPER")
    client.add_split_args(s)
    s.set_defaults(func=_split_bundle)


def _zk_args(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument(
        "--zk",
        type=argtypes.zk_hosts,
        default=default,
        help="ZooKeeper connection string (LOADMGR_ZK_HOSTS; default: the running demo's)",
    )
    p.add_argument(
        "--chroot", type=argtypes.chroot, default=default, help="ZooKeeper chroot (LOADMGR_ZK_CHROOT)"
    )


def use_rest(args: argparse.Namespace) -> bool:
    """REST when a URL is named or a demo runs, unless ZooKeeper is named explicitly."""
    if args.url or os.environ.get("LOADMGR_URL"):
        return True
    if args.zk or args.chroot:
        return False
    return endpoints.demo_url() is not None


def _admin(args: argparse.Namespace) -> Any:
    from service.demo.state import state_path
    from service.errors import StoreUnavailable
    from service.zookeeper.metadata.namespaces import NamespaceAdmin
    from service.zookeeper.metadata.store import ZkStore

    zk = endpoints.zk_hosts(args.zk)
    overrides: dict[str, Any] = {
        k: v for k, v in (("zk_hosts", zk), ("zk_chroot", args.chroot)) if v is not None
    }
    settings = Settings(**overrides)
    if not zk_probe.answers(settings.zk_hosts):
        if args.zk or os.environ.get("LOADMGR_ZK_HOSTS"):
            raise StoreUnavailable(f"no ZooKeeper answers at {settings.zk_hosts}: is it running?")
        raise StoreUnavailable(
            f"nothing to ask: no loadmgr demo or Pulsar-mode serve is running (none recorded in "
            f"{state_path()}) and no ZooKeeper answers at {settings.zk_hosts}: start one (`loadmgr demo`), "
            "or name it with --url or --zk"
        )
    # loadmgr's identity, ACL and TLS, as `serve` uses them: the nodes it creates are loadmgr's
    store = ZkStore.from_settings(settings)
    store.start(timeout_s=settings.zk_session_timeout_s)
    from service.leader.reads import PULSAR_OWNS_NAMESPACES

    return NamespaceAdmin(store, PULSAR_OWNS_NAMESPACES if settings.pulsar_mode else None), settings


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


def _exit_code(e: Exception) -> int:
    from balancer.errors import InvalidInput, UnknownNamespace

    caller = isinstance(e, InvalidInput | UnknownNamespace | KeyError) or type(e).__name__ == "AlreadyExists"
    return client.EXIT_CALLER if caller else client.EXIT_SERVER


def _zk_run(args: argparse.Namespace, fn: Any) -> int:
    from balancer.errors import LoadMgrError

    with quiet_kazoo(Settings().log_level):
        try:
            admin, settings = _admin(args)
        except LoadMgrError as e:  # ZooKeeper not reachable or refusing us: not the caller's input
            print(f"loadmgr: {e}", file=sys.stderr)
            return client.EXIT_SERVER
        try:
            return int(fn(admin, settings))
        except (LoadMgrError, KeyError) as e:
            print(f"loadmgr: {e}", file=sys.stderr)
            return _exit_code(e)
        finally:
            admin.store.stop()


def _path(namespace: str) -> str:
    from balancer.errors import InvalidInput

    parts = namespace.strip().split("/")
    if len(parts) != 2 or not all(parts):
        raise InvalidInput("namespace", namespace, "expected tenant/namespace")
    return f"/namespaces/{parts[0]}/{parts[1]}"


def _create(args: argparse.Namespace) -> int:
    if use_rest(args):

        def go(a: argparse.Namespace) -> int:
            body: dict[str, Any] = {"bundles": a.bundles}
            if a.cluster:
                body["cluster"] = a.cluster
            if a.anti_affinity_group:
                body["namespaceAntiAffinityGroup"] = a.anti_affinity_group
            r = client.call(a, "POST", _path(a.namespace), json=body)
            return emit(a, r, lambda: f"created {r['namespace']} with {r['bundles']} bundles")

        return client.run_api(args, go)

    def zk(admin: Any, settings: Settings) -> int:
        layout = admin.create(
            args.namespace, args.bundles, args.cluster or settings.cluster or None, args.anti_affinity_group
        )
        doc = {"namespace": args.namespace, "bundles": len(layout.ranges)}
        return emit(args, doc, lambda: f"created {args.namespace} with {len(layout.ranges)} bundles")

    return _zk_run(args, zk)


def _list_render(rows: list[dict[str, Any]]) -> Any:
    return table(
        [[r["namespace"], r["bundles"], r.get("namespaceAntiAffinityGroup")] for r in rows],
        ["namespace", "bundles", "antiAffinityGroup"],
    )


def _list(args: argparse.Namespace) -> int:
    if use_rest(args):

        def go(a: argparse.Namespace) -> int:
            rows = client.call(a, "GET", "/namespaces")
            return emit(a, rows, lambda: _list_render(rows))

        return client.run_api(args, go)

    def zk(admin: Any, settings: Settings) -> int:
        rows = [
            {
                "namespace": r.namespace,
                "bundles": r.bundles,
                "namespaceAntiAffinityGroup": r.anti_affinity_group,
            }
            for r in admin.list()
        ]
        return emit(args, rows, lambda: _list_render(rows))

    return _zk_run(args, zk)


def _delete(args: argparse.Namespace) -> int:
    if use_rest(args):

        def go(a: argparse.Namespace) -> int:
            client.call(a, "DELETE", _path(a.namespace))
            return emit(a, {"deleted": a.namespace}, lambda: f"deleted {a.namespace}")

        return client.run_api(args, go)

    def zk(admin: Any, settings: Settings) -> int:
        admin.delete(args.namespace)
        return emit(args, {"deleted": args.namespace}, lambda: f"deleted {args.namespace}")

    return _zk_run(args, zk)


def _policies(args: argparse.Namespace) -> int:
    from balancer.errors import InvalidInput

    if args.isolation_policy and not args.primary:
        raise InvalidInput("--primary", args.primary, "an isolation policy needs primary brokers")
    if use_rest(args):

        def go(a: argparse.Namespace) -> int:
            body: dict[str, Any] = {}
            if a.anti_affinity_group or a.no_anti_affinity_group:
                body["namespaceAntiAffinityGroup"] = a.anti_affinity_group or ""
            if a.isolation_policy:
                iso: dict[str, Any] = {
                    "name": a.isolation_policy,
                    "primary": a.primary,
                    "secondary": a.secondary,
                    "minLimit": a.min_limit,
                }
                if a.cluster:
                    iso["cluster"] = a.cluster
                body["isolationPolicy"] = iso
            r = client.call(a, "PUT", _path(a.namespace) + "/policies", json=body)
            group = r.get("namespaceAntiAffinityGroup") or "(none)"
            iso_text = f"; isolation policy {a.isolation_policy} set" if a.isolation_policy else ""
            return emit(a, r, lambda: f"{r['namespace']}: namespaceAntiAffinityGroup={group}{iso_text}")

        return client.run_api(args, go)

    def zk(admin: Any, settings: Settings) -> int:
        lines = []
        if args.anti_affinity_group or args.no_anti_affinity_group:
            admin.set_anti_affinity_group(args.namespace, args.anti_affinity_group)
            lines.append(
                f"{args.namespace}: namespaceAntiAffinityGroup={args.anti_affinity_group or '(none)'}"
            )
        if args.isolation_policy:
            cluster = args.cluster or settings.cluster
            if not cluster:
                raise InvalidInput("--cluster", cluster, "an isolation policy belongs to a cluster")
            admin.isolate(
                cluster, args.isolation_policy, args.namespace, args.primary, args.secondary, args.min_limit
            )
            lines.append(f"{cluster}: isolation policy {args.isolation_policy} set for {args.namespace}")
        doc = {"namespace": args.namespace, "changes": lines}
        return emit(args, doc, lambda: "\n".join(lines) or "nothing to change")

    return _zk_run(args, zk)


def _bundles(args: argparse.Namespace) -> int:
    """pulsar-admin's ``namespaces bundles``: ``-o json`` is its BundlesData (boundaries, numBundles)."""
    from balancer.bundles import split_bundle_name

    def go(a: argparse.Namespace) -> int:
        _path(a.namespace)  # tenant/namespace, or the error naming it
        rows = client.call(a, "GET", "/bundles", params={"namespace": a.namespace.strip()})
        ranges = sorted(split_bundle_name(r["bundle"])[1] for r in rows)
        boundaries = [f"0x{r.lower:08x}" for r in ranges] + ([f"0x{ranges[-1].upper:08x}"] if ranges else [])
        body = {"boundaries": boundaries, "numBundles": len(ranges)}
        owners = {split_bundle_name(r["bundle"])[1]: r.get("owner") for r in rows}
        data = [[rng.text, owners.get(rng)] for rng in ranges]
        return emit(a, body, lambda: table(data, ["bundle", "owner"], left=2))

    return client.run_api(args, go)


def _unload(args: argparse.Namespace) -> int:
    return client.run_api(args, lambda a: bundle_verbs.do_unload(a, bundle_of(a), a.destination))


def _split_bundle(args: argparse.Namespace) -> int:
    return client.run_api(args, lambda a: bundle_verbs.do_split(a, bundle_of(a)))
