"""kazoo's threading handler with a ``select`` that costs one ``poll`` system call.

kazoo's connection thread waits in ``handler.select`` before every packet it reads (three times per
packet: the loop, the length, the body) and every request it sends. kazoo's own ``select`` builds a
fresh epoll selector each time (``epoll_create``, ``epoll_ctl`` per socket, ``epoll_wait``,
``close``, and the ``selectors`` bookkeeping around them): ~110 us a call on this 2-core machine
against ~12 us for one ``poll``. A leader writing a 21,000-move plan gets a watch event back for
each assignment it watches and rewrites, and a first sync reads ~300,000 nodes one reply each: in
the write's micro-bench (8,000 moves) the events alone cost the connection thread ~1.2 s of CPU.

Same contract as :func:`kazoo.handlers.utils.selector_select` (which exists to lift ``select``'s
1,024-descriptor limit; ``poll`` has no such limit): objects with ``fileno()`` or descriptors in,
the ready ones out, ``TypeError`` for an invalid object, ``ValueError`` for a bad timeout or a
descriptor that is not open.
"""

from __future__ import annotations

import math
import select
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


class PollHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's :class:`SequentialThreadingHandler` with :func:`poll_select`."""

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(*args, **kwargs)
