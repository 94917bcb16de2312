"""ZooKeeper connection strings (``host:port[,host:port...][/chroot]``), checked before any connection
is tried: kazoo reports a malformed one only when it connects, which for the long-term job is after
the whole computation."""

from __future__ import annotations

import re

MAX_PORT = 65535
# A DNS name or an IPv4 literal, or an IPv6 literal in brackets.
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)$")


def check_hosts(text: str) -> str:
    """``text`` if it is a connection string; ValueError saying what is wrong otherwise."""
    hosts, slash, chroot = text.partition("/")
    items = [h.strip() for h in hosts.split(",")]
    if not hosts or any(not h for h in items):
        raise ValueError(f"{text!r} is not a ZooKeeper connection string (host:port,...)")
    for item in items:
        host, sep, port = item.rpartition(":")
        if item.endswith("]") or not sep:  # no port: ZooKeeper's default 2181
            host, port = item, ""
        if not host or not _HOST.match(host):
            raise ValueError(f"{item!r} is not host:port")
        if port and (not port.isdigit() or not 1 <= int(port) <= MAX_PORT):
            raise ValueError(f"{port!r} is not a port number (1-{MAX_PORT})")
    if slash and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise ValueError(f"chroot /{chroot} of {text!r} is not a ZooKeeper path")
    return text
