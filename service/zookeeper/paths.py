"""Pulsar's metadata-store layout (``placement-split-spec.md`` §b) plus loadmgr's own nodes.

Bundle names (``tenant/ns/0x…_0x…``) are appended to a root as they are, so a bundle's node is
``<root>/<tenant>/<ns>/<range>``; readers walk down to the nodes whose name is a bundle range.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import quote, unquote

from balancer.errors import InvalidInput

BROKERS = "/loadbalance/brokers"
LEADER = "/loadbalance/leader"
BUNDLE_DATA = "/loadbalance/bundle-data"
TIME_AVERAGE = "/loadbalance/broker-time-average"
RESOURCE_QUOTA = "/loadbalance/resource-quota"
# Pulsar 2.8+ (LoadBalanceResources.QuotaResources, BundlesQuotas) keeps a bundle's quota at
# ``<RESOURCE_QUOTA>/<bundle>`` and the default at ``<RESOURCE_QUOTA>/default``; before 2.8
# ResourceQuotaCache used ``<RESOURCE_QUOTA>/namespace/<bundle>``, still read for old clusters.
RESOURCE_QUOTA_DEFAULT = RESOURCE_QUOTA + "/default"
RESOURCE_QUOTA_LEGACY = RESOURCE_QUOTA + "/namespace"
LOCAL_POLICIES = "/admin/local-policies"
# Pulsar's cluster-level admin nodes (ClusterResources, NamespaceResources.IsolationPolicyResources):
# ``<CLUSTERS>/<cluster>/namespaceIsolationPolicies`` is one JSON map policy name -> NamespaceIsolationData;
# ``<CLUSTERS>/<cluster>/failureDomain/<domain>`` holds ``{"brokers": [<broker id>, ...]}``.
CLUSTERS = "/admin/clusters"
# TenantInfo at <TENANT_POLICIES>/<tenant>, a namespace's Policies at <TENANT_POLICIES>/<tenant>/<ns>.
TENANT_POLICIES = "/admin/policies"
OWNERSHIP = "/namespace"
# loadmgr's own nodes: the leader's intent per bundle, the fencing epoch and the simulated workload.
LOADMGR = "/loadmgr"
ASSIGNMENTS = "/loadmgr/assignments"
LEADER_EPOCH = "/loadmgr/leader-epoch"
# Pulsar mode: loadmgr's own leader node; Pulsar's brokers keep /loadbalance/leader to themselves.
LOADMGR_LEADER = "/loadmgr/leader"
# Dynamic configuration set through loadmgr (PUT /config), persisted for every instance and failover.
LOADMGR_CONFIG = "/loadmgr/config"
# Maintenance (docs/drain.md): the cordoned brokers, and the one drain under way, written by the
# leader only, fenced on its epoch, watched by every instance.
LOADMGR_CORDONS = "/loadmgr/cordons"
LOADMGR_DRAIN = "/loadmgr/drain"
# Pulsar's dynamic configuration overrides (pulsar-admin brokers update-dynamic-config).
PULSAR_DYNAMIC_CONFIG = "/admin/configuration"
WORKLOAD = "/loadmgr/workload"
# Per-broker assignment hints (docs/ownership.md): the leader creates a persistent sequential node
# ``<BROKER_ASSIGNMENTS>/<brokerId>/<quoted bundle>#<seq>`` in the same fenced transaction as each
# assignment naming that broker, so an agent learns what it was given from one child watch on its
# own directory instead of reading every assignment. The assignment node stays the truth.
BROKER_ASSIGNMENTS = "/loadmgr/broker-assignments"
HINT_SEP = "#"
# A bundle's next owner says it is ready to take over (docs/ownership.md): an ephemeral node
# ``<HANDOFF>/<quoted bundle>@<assignment version>``, created once it watches the old owner's node;
# the old owner keeps serving until it exists (or a bounded wait ends), then lets go.
HANDOFF = "/loadmgr/handoff"
HANDOFF_SEP = "@"

BASE_PATHS = (BROKERS, BUNDLE_DATA, TIME_AVERAGE, RESOURCE_QUOTA, LOCAL_POLICIES, OWNERSHIP, ASSIGNMENTS)

RANGE_RE = re.compile(r"^0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}$")


def is_range(name: str) -> bool:
    return RANGE_RE.match(name) is not None


def join(root: str, name: str) -> str:
    """``root/name``; InvalidInput when ``name`` has a ``.`` or ``..`` segment, which ZooKeeper refuses
    as a relative path: a name from a request must never reach it as a server error."""
    tail = name.strip("/")
    if any(seg in (".", "..") for seg in tail.split("/")):
        raise InvalidInput("path", name, "'.' and '..' are not names")
    return f"{root.rstrip('/')}/{tail}"


def broker_path(broker_id: str) -> str:
    return join(BROKERS, broker_id)


def time_average_path(broker_id: str) -> str:
    return join(TIME_AVERAGE, broker_id)


def bundle_data_path(bundle: str) -> str:
    return join(BUNDLE_DATA, bundle)


def quota_path(bundle: str) -> str:
    return join(RESOURCE_QUOTA, bundle)


def legacy_quota_path(bundle: str) -> str:
    return join(RESOURCE_QUOTA_LEGACY, bundle)


def policies_path(namespace: str) -> str:
    return join(LOCAL_POLICIES, namespace)


def isolation_policies_path(cluster: str) -> str:
    return join(join(CLUSTERS, cluster), "namespaceIsolationPolicies")


def failure_domains_root(cluster: str) -> str:
    return join(join(CLUSTERS, cluster), "failureDomain")


def ownership_path(bundle: str) -> str:
    return join(OWNERSHIP, bundle)


def assignment_path(bundle: str) -> str:
    return join(ASSIGNMENTS, bundle)


# What ``quote(name, safe="")`` leaves as it is, plus "/": a name made only of these quotes to itself
# with each "/" as %2F. Bundle names are such names; a whole-plan cycle quotes one per move (21,000
# at 100k bundles), and urllib's character-by-character pass cost ~20 us each on a loaded machine.
_PLAIN = re.compile(r"[A-Za-z0-9_.~/-]*")


def quote_all(name: str) -> str:
    """``urllib.parse.quote(name, safe="")``, the same string, quicker for plain names."""
    if _PLAIN.fullmatch(name):
        return name.replace("/", "%2F")
    return quote(name, safe="")


@functools.lru_cache(maxsize=4096)  # one per destination broker, asked once per move
def hint_dir(broker_id: str) -> str:
    return join(BROKER_ASSIGNMENTS, quote_all(broker_id))


def hint_prefix(broker_id: str, bundle: str) -> str:
    """The path a hint is created at with ``sequence=True`` (ZooKeeper appends ten digits)."""
    return f"{hint_dir(broker_id)}/{quote_all(bundle)}{HINT_SEP}"


def handoff_path(bundle: str, version: int) -> str:
    """Where the owner-to-be of ``bundle`` under assignment ``version`` says it is ready."""
    return f"{HANDOFF}/{quote(bundle, safe='')}{HANDOFF_SEP}{version}"


def handoff_bundle(path: str) -> str | None:
    """The bundle a handoff node's path names, or None for another path."""
    if not path.startswith(HANDOFF + "/"):
        return None
    head, sep, version = path[len(HANDOFF) + 1 :].rpartition(HANDOFF_SEP)
    return unquote(head) if sep and version.isdigit() else None


def hint_bundle(name: str) -> str | None:
    """The bundle a hint child node names, or None for a name that is not a hint."""
    head, sep, seq = name.rpartition(HINT_SEP)
    if not sep or not seq.isdigit():
        return None
    bundle = unquote(head)
    return bundle if "/" in bundle and is_range(bundle.rsplit("/", 1)[1]) else None


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"
