"""Where a running ``loadmgr demo`` (or ``loadmgr serve --mode pulsar``) can be reached: its REST URL,
ZooKeeper, history and the directory it was started in, in a small JSON file (``~/.loadmgr/demo.json``, or
``LOADMGR_DEMO_STATE``), so every CLI verb finds it without flags.

The demo adds its record once it serves and takes it out when it stops; a reader trusts a record only
while the process that wrote it is alive (a demo killed with -9 leaves a record naming a dead pid, which
is ignored and dropped at the next write). Two demos at once (two ``make run``) each keep a record,
newest first. Which one a verb means (:func:`target`) is never a guess: the one started from this
directory (or a directory above it: the checkout), else the only one running; when more than one could
be meant the verb refuses and names them, because an unload sent to the wrong system moves a bundle
there. Everything read back is checked: the file is in the user's home, but it is still input.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from balancer.errors import LoadMgrError

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
    # the directory the process was started in (absolute): which checkout's system it is
    cwd: str | None = None
    # "demo", or "pulsar" for `serve --mode pulsar`; and the cluster's name when known
    kind: str = "demo"
    cluster: str | None = None

    def describe(self) -> str:
        what = f"Pulsar cluster {self.cluster!r}" if self.kind == "pulsar" else "demo"
        where = f", started in {self.cwd}" if self.cwd else ""
        return f"{what} at {self.url} (ZooKeeper {self.zk_hosts}{where})"


class AmbiguousTarget(LoadMgrError):
    """More than one running system could be the one a verb without --url means."""


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
    cwd, kind, cluster = doc.get("cwd"), doc.get("kind", "demo"), doc.get("cluster")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        cwd = None
    if kind not in ("demo", "pulsar"):
        return None
    if cluster is not None and not isinstance(cluster, str):
        cluster = None
    return DemoState(pid, url, zk, history, cwd, kind, cluster)


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


def running(path: Path | None = None) -> list[DemoState]:
    """Every record whose process lives, newest first; instances of one system (the same ZooKeeper)
    count once, as their newest record."""
    seen: set[str] = set()
    out: list[DemoState] = []
    for entry in _entries(path or state_path()):
        if entry.zk_hosts in seen or not _alive(entry.pid):
            continue
        seen.add(entry.zk_hosts)
        out.append(entry)
    return out


def _within(here: str, root: str) -> bool:
    try:
        return os.path.commonpath([here, root]) == root
    except ValueError:  # different drives
        return False


def target(path: Path | None = None, cwd: str | None = None) -> DemoState | None:
    """The running system a verb without --url/--zk means: the one started from ``cwd`` (or a
    directory above it), else the only one running; None when none runs. AmbiguousTarget, naming
    every candidate, when more than one could be meant."""
    live = running(path)
    if not live:
        return None
    here = os.path.realpath(cwd or os.getcwd())
    mine = [e for e in live if e.cwd is not None and _within(here, os.path.realpath(e.cwd))]
    if len(mine) == 1:
        return mine[0]
    if not mine and len(live) == 1:
        return live[0]
    candidates = mine or live
    why = f"were started from {here}" if mine else f"are running and none was started from {here}"
    raise AmbiguousTarget(
        f"which system? {len(candidates)} {why}: "
        + "; ".join(e.describe() for e in candidates)
        + ". Name one with --url (or LOADMGR_URL), or run from the directory it was started in"
    )
