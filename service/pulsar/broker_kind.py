"""The one place where Pulsar's broker kinds differ for loadmgr: how to read their load and ownership.

* ``modular`` (``ModularLoadManagerImpl``): every broker's LocalBrokerData under
  ``/loadbalance/brokers`` and ownership nodes under ``/namespace`` — the leader's ZooKeeper cache
  already holds both, nothing is added;
* ``extensible`` (``ExtensibleLoadManagerImpl``): the registry under ``/loadbalance/brokers`` holds
  URLs only; load and ownership come from :class:`service.pulsar.extensible.ExtensibleReads`.

Moves and splits are the same admin calls for both (:class:`service.pulsar.admin.PulsarAdminExecutor`):
on Extensible brokers an unload with ``destinationBroker`` is a transfer (Releasing -> Assigning ->
Owned on the channel; with ``loadBalancerMultiPhaseBundleUnload`` the source tells its clients the
new owner, so they reconnect without a lookup). Which kind runs is read from the brokers' own
``loadManagerClassName`` by the settings check (:mod:`service.pulsar.broker_settings`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from balancer.models import LocalBrokerData
from service.pulsar.admin import PulsarAdmin
from service.pulsar.extensible import TOPIC_TABLE_VIEW, ExtensibleReads
from service.zookeeper.metadata.records import Owner

log = logging.getLogger(__name__)

MODULAR = "modular"
EXTENSIBLE = "extensible"


class BrokerKind(Protocol):
    name: str
    # Whether loadmgr writes /loadbalance/bundle-data itself (nobody else does on these brokers).
    writes_bundle_data: bool

    def waiting(self) -> str | None:
        """Why loadmgr cannot see these brokers' load or ownership yet (None: it can)."""

    def view(
        self, brokers: dict[str, LocalBrokerData], owners: dict[str, Owner]
    ) -> tuple[dict[str, LocalBrokerData], dict[str, Owner]]:
        """The registry and ownership as read from ZooKeeper -> brokers with load, and owners."""

    def owners(self) -> dict[str, Owner] | None:
        """Each bundle's owner now, where this kind keeps ownership; None: ZooKeeper's ``/namespace``
        nodes (the caller reads them)."""

    def close(self) -> None: ...


class ModularKind:
    """Pulsar's default load manager: its ZooKeeper nodes are the whole picture."""

    name = MODULAR
    writes_bundle_data = False  # Pulsar's leader broker writes bundle data

    def waiting(self) -> str | None:
        return None

    def view(
        self, brokers: dict[str, LocalBrokerData], owners: dict[str, Owner]
    ) -> tuple[dict[str, LocalBrokerData], dict[str, Owner]]:
        return brokers, owners  # the very same: the load view keeps everything it read

    def owners(self) -> dict[str, Owner] | None:
        return None

    def close(self) -> None:
        pass


class ExtensibleKind:
    """``ExtensibleLoadManagerImpl``: registry from ZooKeeper, the rest from its channel and topics."""

    name = EXTENSIBLE
    writes_bundle_data = True  # Extensible keeps no bundle data in the metadata store

    def __init__(self, reads: ExtensibleReads, table_view: str = TOPIC_TABLE_VIEW) -> None:
        self.reads = reads
        self.reads.start(table_view)

    def waiting(self) -> str | None:
        return self.reads.waiting()

    def view(
        self, brokers: dict[str, LocalBrokerData], owners: dict[str, Owner]
    ) -> tuple[dict[str, LocalBrokerData], dict[str, Owner]]:
        # Modular's /namespace nodes (none on an Extensible cluster) do not count here.
        return self.reads.view(brokers)

    def owners(self) -> dict[str, Owner] | None:
        # Extensible keeps no /namespace nodes: a move is served when the channel says Owned by its
        # destination (reading ZooKeeper here left every transfer "unowned" until its timeout).
        return self.reads.owners()

    def close(self) -> None:
        self.reads.close()


class BrokerKinds:
    """The kind in use, switched when the settings check finds the brokers run another one."""

    def __init__(
        self,
        admin: PulsarAdmin,
        client_factory: Callable[[str], Any],
        metadata_read: Callable[[str], dict[str, bytes]] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self._admin = admin
        self._client_factory = client_factory
        self._metadata_read = metadata_read
        self._on_ready = on_ready
        self.current: BrokerKind = ModularKind()
        self._table_view = TOPIC_TABLE_VIEW

    def use(self, name: str, table_view: str = TOPIC_TABLE_VIEW) -> BrokerKind:
        if name == self.current.name and (name != EXTENSIBLE or table_view == self._table_view):
            return self.current
        log.info("Pulsar brokers run the %s load manager: loadmgr reads them as such", name)
        self.current.close()
        self._table_view = table_view
        if name == EXTENSIBLE:
            reads = ExtensibleReads(
                self._admin, self._client_factory, self._metadata_read, on_ready=self._on_ready
            )
            self.current = ExtensibleKind(reads, table_view)
        else:
            self.current = ModularKind()
        return self.current

    def view(
        self, brokers: dict[str, LocalBrokerData], owners: dict[str, Owner]
    ) -> tuple[dict[str, LocalBrokerData], dict[str, Owner]]:
        return self.current.view(brokers, owners)

    def owners(self) -> dict[str, Owner] | None:
        return self.current.owners()

    def close(self) -> None:
        self.current.close()
