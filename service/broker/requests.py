"""``AgentRequests``: how an agent sends its ZooKeeper requests, a few in flight, bookkeeping in bulk.

A base of :class:`service.broker.handoff.Handoff` and so of
:class:`service.broker.ownership.OwnershipFollower` (kept apart so neither module passes the ~400-line
guideline). The agent's process is also the one whose takes moved bundles wait for, so what it sends
is kept short: a watch event or a take queues behind at most AGENT_PIPELINE of its own requests, and
nodes it only keeps for itself (hints, "ready" nodes) are created and deleted many to a transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent

from service.zookeeper import paths as P
from service.zookeeper.session import bulk
from service.zookeeper.session.wire import translated

if TYPE_CHECKING:
    from service.zookeeper.metadata.store import ZkStore

# Requests an agent keeps in flight. A watch event reaches the agent behind the answers already on
# their way, and its next owner's create goes out behind the requests already queued: with 512 in
# flight (the leader's read depth) a moved bundle waited for the new owner's backlog, a median of
# ~420 ms per move with 20 agent processes on two cores; with 32, 219 ms; with 8, 118-165 ms
# (bench/agent_scale.py). The round trips this adds are a fraction of a millisecond each.
AGENT_PIPELINE = 8

# Creates or deletes of an agent's own bookkeeping nodes (hints, "ready" nodes) that go out together:
# one multi-op transaction each instead of a request per node, so a cycle's burst of them costs the
# agent's process, which is also the one whose takes the moved bundles wait for, a few requests.
AGENT_MULTI = 64


# Reads at least this many go as ZooKeeper multiReads plus SetWatches (service/zookeeper/session/bulk.py):
# three requests instead of one each, when a cycle hands the agent hundreds of moves at once.
AGENT_BULK_MIN = 32


class AgentRequests:
    if TYPE_CHECKING:
        _store: ZkStore
        requests: int

    def _ensure_parents(self, bundles: list[str]) -> None:
        parents = sorted({P.parent(P.ownership_path(b)) for b in bundles})
        client = self._store.client
        for parent, stat in self._pipelined(parents, client.exists_async):
            if stat is None:
                self.requests += 1
                with translated():
                    client.ensure_path(parent)

    def _watched(
        self,
        keys: Sequence[str],
        path_of: Callable[[str], str],
        watch: Callable[[WatchedEvent], None],
        exists: bool = False,
    ) -> list[tuple[str, Any]]:
        """Each key's node read as kazoo's ``get(path, watch=...)`` reads it (``(data, stat)``; None or
        NoNodeError where there is none), or with ``exists`` as ``exists(path, watch=...)`` does (the
        stat or None; the watch then also fires on the create): many at once through multiRead +
        SetWatches (service/zookeeper/session/bulk.py)."""
        client = self._store.client
        if len(keys) < AGENT_BULK_MIN or not bulk.supported(client):
            call = client.exists_async if exists else client.get_async
            return self._pipelined(keys, lambda k: call(path_of(k), watch=watch))
        timeout = max(self._store.session_timeout_s, 1.0) * 4
        with translated():
            paths = [path_of(k) for k in keys]
            read = bulk.get_with_watches(client, paths, watch, timeout, absent_too=exists)
        # the zxid's round trip, then per READ_BATCH a multiRead and SetWatches (two when some are absent)
        self.requests += 1 + -(-len(keys) // bulk.READ_BATCH) * (3 if exists else 2)
        if exists:
            return [(k, None if got is None else got[1]) for k, got in zip(keys, read, strict=True)]
        return list(zip(keys, read, strict=True))

    def _together(self, paths: list[str], op: Callable[[Any, str], None]) -> list[str]:
        """``op(tx, path)`` for each path, AGENT_MULTI to a transaction; returns the paths of the
        transactions that failed as a whole (one node already gone, or already there), to be done
        again a request each."""
        client = self._store.client
        chunks = {str(i): paths[i : i + AGENT_MULTI] for i in range(0, len(paths), AGENT_MULTI)}

        def commit(k: str) -> Any:
            tx = client.transaction()
            for path in chunks[k]:
                op(tx, path)
            return tx.commit_async()

        failed: list[str] = []
        for k, result in self._pipelined(sorted(chunks, key=int), commit):
            if isinstance(result, Exception) or any(isinstance(r, Exception) for r in result):
                failed += chunks[k]
        return failed

    def _delete_all(self, paths: list[str]) -> None:
        """Delete every node of ``paths`` (gone already is fine), many to a transaction."""
        failed = self._together(paths, lambda tx, path: tx.delete(path))
        self._pipelined(failed, self._store.client.delete_async)  # a request each, gone is fine

    def _pipelined(self, keys: Sequence[str], start: Callable[[str], Any]) -> list[tuple[str, Any]]:
        """``start(key)`` (one async request) for each key, at most AGENT_PIPELINE in flight; each key with
        its result, or with the NoNode / NodeExists / BadVersion error it ended with."""
        out: list[tuple[str, Any]] = []
        timeout = max(self._store.session_timeout_s, 1.0) * 2
        with translated():
            for first in range(0, len(keys), AGENT_PIPELINE):
                chunk = [(key, start(key)) for key in keys[first : first + AGENT_PIPELINE]]
                self.requests += len(chunk)
                for key, pending in chunk:
                    try:
                        out.append((key, pending.get(timeout=timeout)))
                    except (NoNodeError, NodeExistsError, BadVersionError) as e:
                        out.append((key, e))
        return out
