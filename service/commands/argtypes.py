"""argparse ``type=`` validators: a bad argument is refused by argparse itself, as one usage line
naming the option and the value, with exit code 2, before any command starts.

Each function takes the argument's text and returns the parsed value or raises
``argparse.ArgumentTypeError`` with the reason; argparse adds the option name.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from service.zookeeper.session.hosts import check_hosts

MAX_PORT = 65535
HASH_SPACE = 2**32  # Pulsar's bundle ranges cover [0, 2^32]


def _port_value(text: str, allow_zero: bool) -> int:
    try:
        port = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    lo = 0 if allow_zero else 1
    if not lo <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{port} is not a port number ({lo}-{MAX_PORT})")
    return port


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    return _port_value(text, allow_zero=False)


def port_or_zero(text: str) -> int:
    """A TCP port, or 0 for any free one."""
    return _port_value(text, allow_zero=True)


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds, intervals): 0 would make a loop spin."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a finite number greater than 0")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


MIN_HEAP_MB = 64


def heap_mb(text: str) -> int:
    """A Java heap in MiB: at least 64 (ZooKeeper does not start below), at most this machine's memory
    (the JVM would refuse it only after starting, in its own words)."""
    from service.settings import total_memory_mb

    value = positive_int(text)
    total = total_memory_mb()
    if value < MIN_HEAP_MB:
        raise argparse.ArgumentTypeError(f"{value} MiB is below the {MIN_HEAP_MB} MiB ZooKeeper needs")
    if total is not None and value > total:
        raise argparse.ArgumentTypeError(f"{value} MiB is more than this machine's {total} MiB of memory")
    return value


def zk_hosts(text: str) -> str:
    """A ZooKeeper connection string: ``host:port[,host:port...][/chroot]``."""
    try:
        return check_hosts(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def broker_id(text: str) -> str:
    """Pulsar's broker id ``host:port``: one ZooKeeper node name, so no '/' (which would create a
    persistent parent under /loadbalance/brokers) and no spaces or control characters."""
    if "/" in text or not text or len(text) > 255 or any(c.isspace() or ord(c) < 32 for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a broker id (host:port, no '/' or spaces)")
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not a broker id (host:port)")
    _port_value(port_text, allow_zero=False)
    return text


def chroot(text: str) -> str:
    """An empty chroot or an absolute ZooKeeper path."""
    if text and (not text.startswith("/") or "//" in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a ZooKeeper path (it must start with '/')")
    return text


def hash_positions(text: str) -> list[int]:
    """Comma-separated split positions in Pulsar's hash space, decimal or 0x-hex."""
    out: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value = int(item, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a hash position (e.g. 0x40000000)") from None
        if not 0 <= value <= HASH_SPACE:
            raise argparse.ArgumentTypeError(f"{item} is outside the hash range 0-0x100000000")
        out.append(value)
    if not out:
        raise argparse.ArgumentTypeError(f"{text!r} names no position")
    return out


def readable_text_file(text: str) -> Path:
    """A file that exists and is UTF-8 text (a broker.conf): checked now, not after connecting."""
    path = Path(text)
    try:
        path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text}: no such file") from None
    except IsADirectoryError:
        raise argparse.ArgumentTypeError(f"{text}: is a directory") from None
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{text}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise argparse.ArgumentTypeError(f"{text}: not UTF-8 text (byte {e.start})") from None
    return path
