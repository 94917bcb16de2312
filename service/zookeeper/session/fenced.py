"""Fenced multi-op transactions: :class:`Fenced`, a write that commits only under the leader epoch.

Made by :meth:`service.zookeeper.session.nodes.JsonZk.fenced`; batches of them, several in flight, are
:mod:`service.zookeeper.session.batch`'s.
"""

from __future__ import annotations

from typing import Any, Protocol

from kazoo.exceptions import RolledBackError

from service.errors import FencedOut, StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.session.wire import Versioned, json_bytes, translated


class FencedStore(Protocol):
    """What a fenced transaction needs of its session (:class:`~service.zookeeper.session.nodes.JsonZk`);
    a protocol, so this module does not import the one that builds it."""

    @property
    def client(self) -> Any: ...

    def ensure_parent(self, path: str) -> None: ...

    def report_fenced_out(self, why: str) -> None: ...


class Fenced:
    """A multi-op write that commits only if this writer still holds the leader epoch it was given."""

    def __init__(self, store: FencedStore, fence: Versioned[str] | None) -> None:
        self._store = store
        self._fence = fence
        self._tx = store.client.transaction()
        if fence is not None:
            self._tx.check(P.LEADER_EPOCH, fence.version)

    def set_json(self, path: str, obj: Any, version: int = -1) -> Fenced:
        self._tx.set_data(path, json_bytes(obj), version)
        return self

    def create_json(self, path: str, obj: Any, ephemeral: bool = False) -> Fenced:
        self._store.ensure_parent(path)
        self._tx.create(path, json_bytes(obj), ephemeral=ephemeral)
        return self

    def upsert_json(self, path: str, obj: Any) -> Fenced:
        """Create or overwrite; existence is read now, so a concurrent create makes the commit fail."""
        with translated():
            stat = self._store.client.exists(path)
        return self.create_json(path, obj) if stat is None else self.set_json(path, obj, stat.version)

    def hint(self, broker_id: str, bundle: str) -> Fenced:
        """Announce to ``broker_id``'s agent that this transaction assigns ``bundle`` to it
        (a sequential node under its hint directory; ``docs/ownership.md``)."""
        path = P.hint_prefix(broker_id, bundle)
        self._store.ensure_parent(path)
        self._tx.create(path, b"", sequence=True)
        return self

    def delete(self, path: str, version: int = -1) -> Fenced:
        self._tx.delete(path, version)
        return self

    def check(self, path: str, version: int) -> Fenced:
        self._tx.check(path, version)
        return self

    def commit(self) -> None:
        with translated():
            results = self._tx.commit()
        errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if self._fence is not None and results and errors and results[0] is errors[0]:
            # The epoch check is the first op: the epoch moved on, so this writer no longer leads.
            why = f"leader epoch {self._fence.version} superseded ({type(errors[0]).__name__})"
            self._store.report_fenced_out(why)
            raise FencedOut(f"transaction refused: {why}")
        if errors:
            raise StaleWrite(f"transaction refused: {type(errors[0]).__name__}")
