"""Whether Pulsar's brokers would fight loadmgr: their own shedding or auto-split switched on.

loadmgr in Pulsar mode decides shedding and splits for the brokers. A broker whose own load manager
also sheds (``loadBalancerSheddingEnabled``) or splits (``loadBalancerAutoBundleSplitEnabled``)
would undo and redo loadmgr's moves, so loadmgr refuses to act while any broker has either on (or
runs in dry-run beside them when ``pulsar_beside_brokers`` is set). What counts is the effective
value: a dynamic override in ``/admin/configuration`` (``pulsar-admin brokers update-dynamic-config``)
wins over the broker's runtime value, and ``loadBalancerEnabled=false`` turns both off.

loadmgr drives brokers that all run ``ModularLoadManagerImpl`` or all run ``ExtensibleLoadManagerImpl``
(:mod:`service.pulsar.broker_kind`); a mix, or another load manager, is a conflict. Extensible brokers
shed (UnloadScheduler) and split (SplitScheduler) under the same two keys; on them loadmgr also needs
``loadBalancerMultiPhaseBundleUnload`` (default true): without it a transfer closes the bundle and
every client looks it up again, as an unload does. All of them must read ownership the same way
(``loadManagerServiceUnitStateTableViewClassName``: the channel topic, or the metadata store).
:func:`evaluate` is pure; :func:`check` does the reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from service.errors import ExecutorError, ServiceError
from service.pulsar.admin import PulsarAdmin
from service.pulsar.broker_kind import EXTENSIBLE as EXTENSIBLE_KIND
from service.pulsar.broker_kind import MODULAR as MODULAR_KIND
from service.pulsar.extensible import METADATA_TABLE_VIEW, TOPIC_TABLE_VIEW

log = logging.getLogger(__name__)

MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
EXTENSIBLE = "ExtensibleLoadManagerImpl"
SHEDDING = "loadBalancerSheddingEnabled"
AUTO_SPLIT = "loadBalancerAutoBundleSplitEnabled"
ENABLED = "loadBalancerEnabled"
MANAGER = "loadManagerClassName"
MULTI_PHASE = "loadBalancerMultiPhaseBundleUnload"
TABLE_VIEW = "loadManagerServiceUnitStateTableViewClassName"
# Pulsar's defaults for the keys, should a broker's runtime answer lack one.
DEFAULTS = {
    ENABLED: "true",
    SHEDDING: "true",
    AUTO_SPLIT: "true",
    MANAGER: MODULAR,
    MULTI_PHASE: "true",
    TABLE_VIEW: TOPIC_TABLE_VIEW,
}


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: ``conflicts`` (one line each, naming broker, key and value) and
    ``unreachable`` brokers whose settings could not be read."""

    conflicts: tuple[str, ...] = ()
    unreachable: tuple[str, ...] = ()
    brokers: tuple[str, ...] = ()
    dynamic: Mapping[str, str] = field(default_factory=dict)
    kind: str | None = None  # broker_kind.MODULAR or EXTENSIBLE when every broker read runs it
    table_view: str = TOPIC_TABLE_VIEW  # where Extensible brokers keep ownership
    waiting: tuple[str, ...] = ()  # what loadmgr has not read yet of these brokers (their kind's)

    @property
    def clear(self) -> bool:
        """loadmgr may act: every broker read, none in conflict (and at least one broker)."""
        return bool(self.brokers) and not self.conflicts and not self.unreachable and not self.waiting

    def reason(self) -> str:
        if not self.brokers:
            return "no Pulsar broker is registered under /loadbalance/brokers"
        parts = list(self.conflicts) + [f"{b}: settings unreadable" for b in self.unreachable]
        return "; ".join(parts + list(self.waiting))


def _true(value: str | None) -> bool:
    return str(value).strip().lower() == "true"


def kind_of(manager: str) -> str | None:
    if "ExtensibleLoadManagerImpl" in manager:
        return EXTENSIBLE_KIND
    if "ModularLoadManagerImpl" in manager:
        return MODULAR_KIND
    return None


def evaluate(runtime: Mapping[str, Mapping[str, str]], dynamic: Mapping[str, str]) -> list[str]:
    """Conflicting settings of brokers -> effective runtime config, under the dynamic overrides."""
    return evaluate_kind(runtime, dynamic)[0]


def evaluate_kind(
    runtime: Mapping[str, Mapping[str, str]], dynamic: Mapping[str, str]
) -> tuple[list[str], str | None, str]:
    """The conflicts, the brokers' kind (None: none or mixed) and their ownership table view."""
    found: list[str] = []
    kinds: dict[str, list[str]] = {}
    views: set[str] = set()
    for broker, conf in sorted(runtime.items()):

        def effective(key: str, conf: Mapping[str, str] = conf) -> tuple[str, str]:
            if key in dynamic:
                return dynamic[key], " (dynamic, /admin/configuration)"
            return conf.get(key, DEFAULTS[key]), ""

        manager, _ = effective(MANAGER)
        kind = kind_of(manager)
        if kind is None:
            found.append(
                f"{broker}: {MANAGER}={manager} (loadmgr drives ModularLoadManagerImpl or "
                "ExtensibleLoadManagerImpl brokers)"
            )
            continue
        kinds.setdefault(kind, []).append(broker)
        if kind == EXTENSIBLE_KIND:
            view, where = effective(TABLE_VIEW)
            views.add(view)
            if view not in (TOPIC_TABLE_VIEW, METADATA_TABLE_VIEW):
                found.append(f"{broker}: {TABLE_VIEW}={view}{where} (loadmgr reads Pulsar's two table views)")
            multi, where = effective(MULTI_PHASE)
            if not _true(multi):
                found.append(
                    f"{broker}: {MULTI_PHASE}={multi}{where} (loadmgr moves Extensible bundles as "
                    "transfers: without it every client looks the bundle up again)"
                )
        enabled, _ = effective(ENABLED)
        if not _true(enabled):
            continue
        for key in (SHEDDING, AUTO_SPLIT):
            value, where = effective(key)
            if _true(value):
                found.append(f"{broker}: {key}=true{where}")
    if len(kinds) > 1:
        found.append(
            "brokers run different load managers ("
            + "; ".join(f"{k}: {', '.join(bs)}" for k, bs in sorted(kinds.items()))
            + "): loadmgr drives one kind at a time"
        )
    if len(views) > 1:
        found.append(f"Extensible brokers disagree on {TABLE_VIEW} ({', '.join(sorted(views))})")
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    return found, kind, next(iter(views)) if len(views) == 1 else TOPIC_TABLE_VIEW


def check(
    brokers: Mapping[str, Any],
    admin: PulsarAdmin,
    dynamic: Mapping[str, str],
    url_of: Callable[[str, Any], str | None],
) -> Verdict:
    """Read every registered broker's runtime settings (``brokers``: id -> its LocalBrokerData;
    ``url_of`` gives the web URL to ask) and evaluate them under ``dynamic``."""
    runtime: dict[str, dict[str, str]] = {}
    unreachable: list[str] = []
    for broker, data in sorted(brokers.items()):
        url = url_of(broker, data)
        if url is None:
            unreachable.append(broker)
            continue
        try:
            runtime[broker] = admin.runtime_config(url)
        except (ExecutorError, ServiceError) as e:
            log.info("broker settings of %s unreadable: %s", broker, e)
            unreachable.append(broker)
    conflicts, kind, table_view = evaluate_kind(runtime, dynamic)
    return Verdict(
        conflicts=tuple(conflicts),
        unreachable=tuple(unreachable),
        brokers=tuple(sorted(brokers)),
        dynamic=dict(dynamic),
        kind=kind,
        table_view=table_view,
    )
