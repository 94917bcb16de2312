"""Merge recomputed ``longTermData`` into Pulsar's ``/loadbalance/bundle-data/<tenant>/<ns>/<range>``.

Only the ``longTermData`` member is replaced. Every other member of an existing node (``shortTermData``,
``topics``, and anything a newer Pulsar writes) is kept byte-for-byte as JSON, and each write is a
compare-and-set on the node version, retried after a concurrent writer (the leader's periodic
bundle-data write) won the race.

Missing nodes: Pulsar writes only the top-K bundles (``loadBalancerMaxNumberOfBundlesInBundleLoadReport``,
default 10), so most live bundles have no node. Such a node is created with Pulsar's default short-term
seed (50 msg/s, 50 000 B/s, ``numSamples`` 0, which the first real sample replaces) so that a leader
picking the bundle up seeds its long-term window from history. A node is created only for a bundle that
was live at the end of the history range; a bundle that had vanished earlier (split, unloaded
namespace) is skipped, because Pulsar never deletes a node of a bundle it does not hold in memory and
the stale data would stay forever.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoAuthError, NodeExistsError, NoNodeError

from balancer.bundles import split_bundle_name
from balancer.errors import InvalidInput
from balancer.explain import Explanation, explain
from balancer.models import BundleData, TimeAverageMessageData
from service.zookeeper.session.validate import BadNode, decode

log = logging.getLogger(__name__)

BUNDLE_DATA_ROOT = "/loadbalance/bundle-data"


def bundle_data_path(bundle: str) -> str:
    """The node of a bundle; the name is validated so a bad row cannot address an arbitrary path."""
    namespace, rng = split_bundle_name(bundle)
    if namespace.count("/") not in (1, 2) or any(not part for part in namespace.split("/")):
        raise InvalidInput("bundle", bundle, "expected <tenant>/<namespace>/0x<lower>_0x<upper>")
    return f"{BUNDLE_DATA_ROOT}/{namespace}/{rng.text}"


@dataclass
class MergeReport:
    updated: int = 0
    created: int = 0
    skipped: int = 0
    conflicts_retried: int = 0
    outcomes: list[Explanation] = field(default_factory=list)
    stopped: str | None = None  # why ZooKeeper ended the merge early (connection lost), if it did
    refused: list[str] = field(default_factory=list)  # bundles whose node (or parent) ACL refused us

    @property
    def done(self) -> int:
        return self.updated + self.created + self.skipped


def merge_long_term(
    client: KazooClient,
    long_term: Mapping[str, TimeAverageMessageData],
    live_bundles: set[str],
    max_attempts: int = 8,
) -> MergeReport:
    """Write each bundle's ``longTermData``; ``live_bundles`` are those allowed to get a new node."""
    report = MergeReport()
    for bundle in sorted(long_term):
        try:
            outcome = _merge_one(
                client, bundle, long_term[bundle], bundle in live_bundles, max_attempts, report
            )
        except NoAuthError:
            # This node's ACL (or its parent's, for a create) does not grant loadmgr's identity: a
            # rerun would be refused the same way, so go on with the others and name it at the end.
            report.refused.append(bundle)
            outcome = explain("refused", "ZooKeeper's ACL refused this identity (NoAuth)", bundle)
        except KazooException as e:
            # A lost connection or session: every later write would fail the same way. Stop with what
            # is done; each write replaced one whole node, so a rerun of the same range finishes the rest.
            report.stopped = f"{type(e).__name__} at {bundle}"
            break
        report.outcomes.append(outcome)
    return report


def _merge_one(
    client: KazooClient,
    bundle: str,
    data: TimeAverageMessageData,
    may_create: bool,
    max_attempts: int,
    report: MergeReport,
) -> Explanation:
    try:
        path = bundle_data_path(bundle)
    except InvalidInput as e:
        report.skipped += 1
        return explain("bad_bundle_name", str(e), subject=bundle)
    long_json = data.to_json_dict()
    numbers = {"msgRateIn": data.msg_rate_in, "msgRateOut": data.msg_rate_out, "numSamples": data.num_samples}
    for _ in range(max_attempts):
        try:
            raw, stat = client.get(path)
        except NoNodeError:
            if not may_create:
                report.skipped += 1
                return explain(
                    "skipped_stale",
                    "no node and the bundle was gone before the range ended",
                    bundle,
                    **numbers,
                )
            doc = BundleData.default().to_json_dict()
            doc["longTermData"] = long_json
            try:
                client.create(path, _encode(doc), makepath=True)
            except NodeExistsError:
                report.conflicts_retried += 1
                continue  # the leader wrote it meanwhile: merge into its node instead
            report.created += 1
            return explain("created", "new node with default short-term data", bundle, **numbers)
        try:
            parsed: Any = decode(raw)  # size and depth checked first: a poison node cannot stop the merge
        except BadNode:
            parsed = None
        if not isinstance(parsed, dict):
            report.skipped += 1
            log.warning("bundle-data node %s is not a JSON object; left untouched", path)
            return explain("skipped_malformed", "existing node is not a JSON object; left untouched", bundle)
        parsed["longTermData"] = long_json
        try:
            client.set(path, _encode(parsed), version=stat.version)
        except BadVersionError:
            report.conflicts_retried += 1
            continue
        except NoNodeError:
            report.conflicts_retried += 1
            continue  # deleted meanwhile (bundle dropped or split): decide again from scratch
        report.updated += 1
        return explain("updated", "longTermData replaced, other members kept", bundle, **numbers)
    report.skipped += 1
    return explain("skipped_conflict", f"node kept changing during {max_attempts} attempts", bundle)


def _encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")
