"""kazoo's threading handler with a ``select`` that costs one ``poll`` system call.

kazoo's connection thread waits in ``handler.select`` before every packet it reads (three times per
packet: the loop, the length, the body) and every request it sends. kazoo's own ``select`` builds a
fresh epoll selector each time (``epoll_create``, ``epoll_ctl`` per socket, ``epoll_wait``,
``close``, and the ``selectors`` bookkeeping around them): ~110 us a call on this 2-core machine
against ~12 us for one ``poll``. A leader writing a 21,000-move plan gets a watch event back for
each assignment it watches and rewrites, and a first sync reads ~300,000 nodes one reply each: in
the write's micro-bench (8,000 moves) the events alone cost the connection thread ~1.2 s of CPU.

The connection's socket is read through a buffer (:class:`BufferedSocket`): kazoo reads each packet
as two ``recv`` calls (its length, then its body), each after a ``select``, unless the socket says it
has bytes ``pending`` (as an SSL socket does). Those 21,000 watch events arrive back to back, ~100
bytes each: read 64 KiB at a time, the buffer answers most reads with neither a ``select`` nor a
``recv``; the connection loop's own wait finds the buffered socket ready at once (one ``poll`` of 0
ms, so a request waiting to be sent is still seen).

Same contract as :func:`kazoo.handlers.utils.selector_select` (which exists to lift ``select``'s
1,024-descriptor limit; ``poll`` has no such limit): objects with ``fileno()`` or descriptors in,
the ready ones out, ``TypeError`` for an invalid object, ``ValueError`` for a bad timeout or a
descriptor that is not open.
"""

from __future__ import annotations

import math
import select
import ssl
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
_ERROR = select.POLLERR | select.POLLHUP  # reported as ready both ways, as select() and epoll do


def poll_select(
    rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """``select(rlist, wlist, xlist, timeout)`` with one ``poll``; ``xlist`` is never reported (as
    kazoo's)."""
    if timeout is not None:
        if not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    wanted: dict[int, int] = {}
    readers: dict[int, list[Any]] = {}
    writers: dict[int, list[Any]] = {}
    for objs, mask, owners in ((rlist, _READ, readers), (wlist, _WRITE, writers)):
        for obj in objs:
            fd = fileobj_to_fd(obj)
            wanted[fd] = wanted.get(fd, 0) | mask
            owners.setdefault(fd, []).append(obj)
    poller = select.poll()
    for fd, mask in wanted.items():
        poller.register(fd, mask)
    # Rounded up: a wait of 0.4 ms must not become a busy poll of 0 ms.
    ready = poller.poll(None if timeout is None else math.ceil(timeout * 1000))
    r: list[Any] = []
    w: list[Any] = []
    for fd, events in ready:
        if events & select.POLLNVAL:
            raise ValueError(f"Invalid event mask or fd: {fd} is not open")
        if events & (_READ | _ERROR):
            r.extend(readers.get(fd, ()))
        if events & (_WRITE | _ERROR):
            w.extend(writers.get(fd, ()))
    return r, w, []


RECV_BYTES = 64 * 1024


class BufferedSocket:
    """A connected plain socket whose ``recv`` is served from a buffer filled up to ``RECV_BYTES``
    at a time; ``pending()`` says how many bytes it holds (kazoo then reads without a ``select``).
    Everything else is the socket's own."""

    __slots__ = ("_buf", "_pos", "_sock")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._buf = b""
        self._pos = 0

    def pending(self) -> int:
        return len(self._buf) - self._pos

    def recv(self, n: int) -> bytes:
        if self.pending():
            return self._take(n)
        data: bytes = self._sock.recv(max(n, RECV_BYTES))
        if len(data) <= n:
            return data  # b"" too: the peer closed
        self._buf, self._pos = data, n
        return data[:n]

    def _take(self, n: int) -> bytes:
        start = self._pos
        end = min(start + n, len(self._buf))
        chunk = self._buf[start:end]
        if end == len(self._buf):
            self._buf, self._pos = b"", 0
        else:
            self._pos = end
        return chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class PollHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's :class:`SequentialThreadingHandler` with :func:`poll_select`, its connections read
    through a :class:`BufferedSocket` (TLS sockets buffer on their own and are left as they are)."""

    def select(
        self, rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
    ) -> tuple[list[Any], list[Any], list[Any]]:
        buffered = [o for o in rlist if type(o) is BufferedSocket and o.pending()]
        if not buffered:
            return poll_select(rlist, wlist, xlist, timeout)
        # Ready now; the others are looked at without waiting, so a request to send is not starved.
        r, w, x = poll_select(rlist, wlist, xlist, 0)
        return r + [o for o in buffered if o not in r], w, x

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        sock = super().create_connection(*args, **kwargs)
        return sock if isinstance(sock, ssl.SSLSocket) else BufferedSocket(sock)
