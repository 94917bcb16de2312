"""Where a running ``loadmgr demo`` can be reached: its REST URL, ZooKeeper and history, in a small JSON
file (``~/.loadmgr/demo.json``, or ``LOADMGR_DEMO_STATE``), so every CLI verb finds the demo without flags.

The demo writes the file once it serves and removes it when it stops; a reader trusts it only while the
process that wrote it is alive (a demo killed with -9 leaves a file naming a dead pid, which is ignored).
Everything read back is checked: the file is in the user's home, but it is still input.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_ENV = "LOADMGR_DEMO_STATE"


def state_path() -> Path:
    given = os.environ.get(STATE_ENV)
    return Path(given) if given else Path.home() / ".loadmgr" / "demo.json"


@dataclass(frozen=True)
class DemoState:
    pid: int
    url: str
    zk_hosts: str
    history: str | None = None


def write_state(state: DemoState, path: Path | None = None) -> Path | None:
    """Writes the file (atomically); None when it cannot be written (the demo runs on without it)."""
    target = path or state_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.write_text(json.dumps(asdict(state), indent=1) + "\n")
        os.replace(tmp, target)
    except OSError:
        return None
    return target


def remove_state(pid: int, path: Path | None = None) -> None:
    """Removes the file if it is still this process's (a second demo may have taken it over)."""
    target = path or state_path()
    got = read_state(target, check_alive=False)
    if got is not None and got.pid == pid:
        with contextlib.suppress(OSError):
            target.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except OSError:
        return False
    return True


def read_state(path: Path | None = None, check_alive: bool = True) -> DemoState | None:
    """The running demo's addresses, or None (no file, unreadable, malformed, or its process is gone)."""
    target = path or state_path()
    try:
        doc = json.loads(target.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    pid, url, zk, history = doc.get("pid"), doc.get("url"), doc.get("zk_hosts"), doc.get("history")
    if not isinstance(pid, int) or pid <= 0 or not isinstance(url, str) or not isinstance(zk, str):
        return None
    if not url.startswith(("http://", "https://")) or not zk:
        return None
    if history is not None and not isinstance(history, str):
        history = None
    if check_alive and not _alive(pid):
        return None
    return DemoState(pid, url, zk, history)
