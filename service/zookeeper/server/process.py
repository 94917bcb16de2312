"""Process plumbing for the embedded ZooKeeper: a free loopback port, ZooKeeper's four-letter
commands, and the prefix that makes Linux kill the JVM when this process dies."""

from __future__ import annotations

import functools
import shutil
import socket
import subprocess
import threading


def free_port() -> int:
    # Inherently racy (the port can be taken before java binds it); start() retries
    # on "Address already in use" to cover that.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something listens on ``host:port`` already (SO_REUSEADDR: a TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def four_letter_word(host: str, port: int, command: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (ruok, srvr, mntr...) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def die_with_parent_prefix() -> list[str]:
    """Command prefix that makes Linux SIGKILL the JVM if this process dies abruptly.

    atexit covers normal exits, but not `kill -9` of pytest or a crashed demo, which
    would otherwise leave an orphan JVM holding its port. util-linux's setpriv sets
    PR_SET_PDEATHSIG and then *execs* java, so the child pid stays the JVM's pid
    (pause()/resume() rely on that); a preexec_fn would do the same but is unsafe
    with the threads kazoo runs in this process. The death signal fires when the
    *thread* that forked exits, so it is only used from the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = _setpriv_with_pdeathsig()
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


@functools.cache
def _setpriv_with_pdeathsig() -> str | None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    try:
        # --pdeathsig only exists since util-linux 2.33.
        help_text = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return setpriv if "--pdeathsig" in help_text else None
