"""Whether Pulsar's brokers would fight loadmgr: their own shedding or auto-split switched on.

loadmgr in Pulsar mode decides shedding and splits for the brokers. A broker whose own load manager
also sheds (``loadBalancerSheddingEnabled``) or splits (``loadBalancerAutoBundleSplitEnabled``)
would undo and redo loadmgr's moves, so loadmgr refuses to act while any broker has either on (or
runs in dry-run beside them when ``pulsar_beside_brokers`` is set). What counts is the effective
value: a dynamic override in ``/admin/configuration`` (``pulsar-admin brokers update-dynamic-config``)
wins over the broker's runtime value, and ``loadBalancerEnabled=false`` turns both off.

loadmgr reads ``ModularLoadManagerImpl``'s reports under ``/loadbalance/brokers``; a broker running
``ExtensibleLoadManagerImpl`` writes none there and moves bundles through its own channel, so it is a
conflict too. :func:`evaluate` is pure; :func:`check` does the reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from service.errors import ExecutorError, ServiceError
from service.pulsar.admin import PulsarAdmin

log = logging.getLogger(__name__)

MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
EXTENSIBLE = "ExtensibleLoadManagerImpl"
SHEDDING = "loadBalancerSheddingEnabled"
AUTO_SPLIT = "loadBalancerAutoBundleSplitEnabled"
ENABLED = "loadBalancerEnabled"
MANAGER = "loadManagerClassName"
# Pulsar's defaults for the keys, should a broker's runtime answer lack one.
DEFAULTS = {ENABLED: "true", SHEDDING: "true", AUTO_SPLIT: "true", MANAGER: MODULAR}


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: ``conflicts`` (one line each, naming broker, key and value) and
    ``unreachable`` brokers whose settings could not be read."""

    conflicts: tuple[str, ...] = ()
    unreachable: tuple[str, ...] = ()
    brokers: tuple[str, ...] = ()
    dynamic: Mapping[str, str] = field(default_factory=dict)

    @property
    def clear(self) -> bool:
        """loadmgr may act: every broker read, none in conflict (and at least one broker)."""
        return bool(self.brokers) and not self.conflicts and not self.unreachable

    def reason(self) -> str:
        if not self.brokers:
            return "no Pulsar broker is registered under /loadbalance/brokers"
        parts = list(self.conflicts) + [f"{b}: settings unreadable" for b in self.unreachable]
        return "; ".join(parts)


def _true(value: str | None) -> bool:
    return str(value).strip().lower() == "true"


def evaluate(runtime: Mapping[str, Mapping[str, str]], dynamic: Mapping[str, str]) -> list[str]:
    """Conflicting settings of brokers -> effective runtime config, under the dynamic overrides."""
    found: list[str] = []
    for broker, conf in sorted(runtime.items()):

        def effective(key: str, conf: Mapping[str, str] = conf) -> tuple[str, str]:
            if key in dynamic:
                return dynamic[key], " (dynamic, /admin/configuration)"
            return conf.get(key, DEFAULTS[key]), ""

        manager, _ = effective(MANAGER)
        if EXTENSIBLE in manager:
            found.append(f"{broker}: {MANAGER}={manager} (loadmgr drives ModularLoadManagerImpl brokers)")
            continue
        enabled, _ = effective(ENABLED)
        if not _true(enabled):
            continue
        for key in (SHEDDING, AUTO_SPLIT):
            value, where = effective(key)
            if _true(value):
                found.append(f"{broker}: {key}=true{where}")
    return found


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
    return Verdict(
        conflicts=tuple(evaluate(runtime, dynamic)),
        unreachable=tuple(unreachable),
        brokers=tuple(sorted(brokers)),
        dynamic=dict(dynamic),
    )
