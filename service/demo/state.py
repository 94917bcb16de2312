"""Where a running ``loadmgr demo`` can be reached: its REST URL, ZooKeeper and history, in a small JSON
file (``~/.loadmgr/demo.json``, or ``LOADMGR_DEMO_STATE``), so every CLI verb finds the demo without flags.

The demo adds its record once it serves and takes it out when it stops; a reader trusts a record only
while the process that wrote it is alive (a demo killed with -9 leaves a record naming a dead pid, which
is ignored and dropped at the next write). Two demos at once (two ``make run``) each keep a record,
newest first: verbs find the newest, and when it stops they find the other again. Everything read back
is checked: the file is in the user's home, but it is still input.
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


def _entries(path: Path) -> list[DemoState]:
    """Every well-formed record in the file, newest first, whether or not its process lives. The file
    of a loadmgr before two demos were kept held one record as the whole document: read as one."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    raw = doc.get("demos") if isinstance(doc, dict) and "demos" in doc else [doc]
    if not isinstance(raw, list):
        return []
    return [st for item in raw if (st := _parse(item)) is not None]


def _parse(doc: object) -> DemoState | None:
    if not isinstance(doc, dict):
        return None
    pid, url, zk, history = doc.get("pid"), doc.get("url"), doc.get("zk_hosts"), doc.get("history")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    if not isinstance(url, str) or not isinstance(zk, str):
        return None
    if not url.startswith(("http://", "https://")) or not zk:
        return None
    if history is not None and not isinstance(history, str):
        history = None
    return DemoState(pid, url, zk, history)


def _write(target: Path, entries: list[DemoState]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"demos": [asdict(e) for e in entries]}, indent=1) + "\n")
    os.replace(tmp, target)


def write_state(state: DemoState, path: Path | None = None) -> Path | None:
    """Adds this demo's record first (atomically), keeping other live demos' records; None when the
    file cannot be written (the demo runs on without it)."""
    target = path or state_path()
    others = [e for e in _entries(target) if e.pid != state.pid and _alive(e.pid)]
    try:
        _write(target, [state, *others])
    except OSError:
        return None
    return target


def remove_state(pid: int, path: Path | None = None) -> None:
    """Takes this process's record out; the file goes with the last live record."""
    target = path or state_path()
    entries = _entries(target)
    if not any(e.pid == pid for e in entries):
        return  # not ours (never written, or a file this demo did not write): left alone
    rest = [e for e in entries if e.pid != pid and _alive(e.pid)]
    with contextlib.suppress(OSError):
        if rest:
            _write(target, rest)
        else:
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
    """The newest running demo's addresses, or None (no file, unreadable, malformed, or no process left)."""
    for entry in _entries(path or state_path()):
        if not check_alive or _alive(entry.pid):
            return entry
    return None
