"""Many reads with watches queued on kazoo's connection at once: what :mod:`service.zookeeper.session.cache`
sends when it reads a subtree or the nodes whose watches fired."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import Exists, GetChildren
from kazoo.protocol.states import KazooState, WatchedEvent

__all__ = ["Call", "submit_many"]


@dataclass(frozen=True)
class Call:
    """One kind of read with a watch: ``request(path, watch)`` is kazoo's request record."""

    request: Any
    watch: Callable[[WatchedEvent], None]

    def __call__(self, client: KazooClient, path: str) -> Any:
        if self.request is GetChildren:
            return client.get_children_async(path, watch=self.watch)
        if self.request is Exists:
            return client.exists_async(path, watch=self.watch)
        return client.get_async(path, watch=self.watch)


def submit_many(client: KazooClient, rels: list[str], call: Any, absolute: Callable[[str], str]) -> list[Any]:
    """Queue one read per path on kazoo's connection, waking its thread with one write for all.

    kazoo's ``*_async`` calls each write a wake-up byte to the connection thread's socket pair, and
    that system call (with the GIL hand-over it causes) is most of a read's cost on the caller's side:
    a 100,000-bundle first sync spent more time there than ZooKeeper took to answer. The connection
    thread sends one queued request per byte it reads, so queueing them all and writing all their
    bytes at once sends exactly the same requests. Anything unusual (not connected, another kazoo
    layout) takes kazoo's own path.
    """
    sock = getattr(getattr(client, "_connection", None), "_write_sock", None)
    queue = getattr(client, "_queue", None)
    if sock is None or queue is None or client.state != KazooState.CONNECTED:
        return [call(client, absolute(rel)) for rel in rels]
    results = []
    for rel in rels:
        result = client.handler.async_result()
        queue.append((call.request(_prefix_root(client.chroot, absolute(rel)), call.watch), result))
        results.append(result)
    try:
        sock.send(b"\0" * len(results))
    except OSError:
        for result in results:
            if not result.ready():
                result.set_exception(ConnectionClosedError("Connection has been closed"))
    return results
