"""Is anything listening at a ZooKeeper connection string? A TCP connect to each host, with a short
timeout: a command that has nothing to talk to says so in a fraction of a second, in one line, instead
of a ZooKeeper client's retries and time-outs (kazoo waits out its whole connect timeout, logging each
refused attempt)."""

from __future__ import annotations

import contextlib
import socket

DEFAULT_PORT = 2181
PROBE_TIMEOUT_S = 2.0


def addresses(hosts: str) -> list[tuple[str, int]]:
    """``host:port,...[/chroot]`` -> [(host, port)]; ``[v6]:port`` and a missing port (2181) too."""
    out: list[tuple[str, int]] = []
    for item in hosts.partition("/")[0].split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        else:
            host, sep, port = item.rpartition(":")
            if not sep:
                host, port = item, ""
        out.append((host, int(port) if port.isdigit() else DEFAULT_PORT))
    return out


def answers(hosts: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when at least one of ``hosts`` accepts a TCP connection."""
    for host, port in addresses(hosts):
        with contextlib.suppress(OSError):
            socket.create_connection((host, port), timeout=timeout_s).close()
            return True
    return False
