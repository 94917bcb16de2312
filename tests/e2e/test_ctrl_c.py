"""Ctrl-C in a terminal signals the whole foreground process group, not one PID. `make run` must come
back within 5 s and leave neither a process (the embedded ZooKeeper JVM included) nor a temp dir."""

from __future__ import annotations

import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e

PROMPT_BACK_S = 5.0


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (the JVM's zoo.cfg lives under it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        cmd = raw.replace(b"\0", b" ").decode(errors="replace")
        if text in cmd:
            found.append(f"{entry.name}: {cmd}")
    return found


def _as_a_foreground_job() -> None:
    """Ctrl-C as a terminal's foreground job gets it: an interactive shell gives the job SIGINT's
    default action. A test run started in the background by a script (`nohup make test &`) has SIGINT
    ignored, and an ignored signal stays ignored across exec: the demo then never saw the Ctrl-C (its
    masks showed SIGINT ignored; it stopped only where another test in the same worker had, by
    accident, replaced the ignored disposition with a handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _demo_command(tmp: Path) -> list[str]:
    """A small, fast-shedding demo whose history goes beside ``tmp``, not into the checkout's
    ./var/history that every demo shares by default."""
    small = ["--port", "0", "--brokers", "3", "--bundles", "6", "--shed-interval", "1"]
    return [sys.executable, "-m", "service", "demo", *small, "--history", str(tmp.parent / "history")]


def _demo_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The demo's environment, with its own state file: the session's in-process demo owns this
    worker's, and a demo started from here would replace it, then remove it on exit."""
    return {**os.environ, "TMPDIR": str(tmp), "LOADMGR_DEMO_STATE": str(tmp / "demo.json"), **extra}


def _start_demo(tmp: Path) -> subprocess.Popen[str]:
    # Its own session makes the demo the leader of a process group, as a shell's foreground job is.
    return subprocess.Popen(
        _demo_command(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_demo_env(tmp, PYTHONUNBUFFERED="1"),
        start_new_session=True,
        preexec_fn=_as_a_foreground_job,
    )


def _stacks_then_fail(proc: subprocess.Popen[str], seen: str) -> None:
    """The demo did not stop: ask it for every thread's stack (``loadmgr`` dumps them on SIGUSR1) so
    the failure says where it hangs, then fail with them."""
    sigs = _signal_state(proc.pid)
    os.kill(proc.pid, signal.SIGUSR1)
    try:
        more, _ = proc.communicate(timeout=3)
    except subprocess.TimeoutExpired as e:
        more = e.output if isinstance(e.output, str) else (e.output or b"").decode(errors="replace")
    tail = (seen + more)[-12000:]
    pytest.fail(f"no exit within 30 s of SIGINT ({sigs}); output, then its threads:\n{tail}")


def _signal_state(pid: int) -> str:
    """The process's blocked, ignored and caught signal masks (a SIGINT it inherited ignored or
    blocked would explain a demo that never sees Ctrl-C)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as e:
        return f"no status: {e}"
    return " ".join(x.replace("\t", "") for x in lines if x.startswith(("SigBlk", "SigIgn", "SigCgt")))


def _wait_for_line(proc: subprocess.Popen[str], needle: str, timeout_s: float) -> str:
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return "".join(seen)
    raise AssertionError(f"no {needle!r} within {timeout_s} s:\n{''.join(seen)}")


@pytest.mark.parametrize("when", ["balanced", "moves pending"])
def test_sigint_to_the_process_group_stops_the_demo_promptly_and_cleanly(tmp_path: Path, when: str) -> None:
    if shutil.which("java") is None:
        pytest.skip("the demo needs Java 17+ for its embedded ZooKeeper")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _start_demo(tmp)
    try:
        # "moves pending": the brokers have just joined and the first shedding cycles are moving
        # bundles, so agents hold ownership nodes and assignments are in flight. "balanced": what
        # `make run` shows an operator before they press Ctrl-C.
        needle = "shedding:" if when == "moves pending" else "balanced after"
        head = _wait_for_line(proc, needle, 90)
        assert _processes_mentioning(str(tmp)), "the embedded ZooKeeper should be running by now"
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired as e:
            _stacks_then_fail(proc, head + (e.output if isinstance(e.output, str) else ""))
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = head + rest
    assert took < PROMPT_BACK_S, f"prompt back after {took:.1f} s\n{out[-3000:]}"
    assert proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out and "Connection refused" not in out, out[-3000:]
    assert "ZooKeeper are down" in out
    if when == "balanced":
        assert "REST API at http://127.0.0.1:" in out and "cpu%" in out and "shedding:" in out, out[-3000:]
        # It recorded into its own history, and Ctrl-C left every file of it whole (readable).
        history = tmp.parent / "history"
        assert list((history / "cycles").rglob("*.parquet")), out[-3000:]
        for part in history.rglob("*.parquet"):
            assert pq.read_table(part).num_rows > 0, part
    # The JVM may take a moment to exit after its parent did (it dies by the parent-death signal).
    deadline = time.monotonic() + 2
    while _processes_mentioning(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_mentioning(str(tmp))
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)
    assert list(tmp.iterdir()) == []


def _read_pty_until(fd: int, needle: bytes, timeout_s: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and needle not in seen:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
    return seen


def test_the_live_terminal_view_redraws_in_place_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    """On a terminal the demo is a rich Live view; Ctrl-C there is just as prompt and clean."""
    if shutil.which("java") is None:
        pytest.skip("the demo needs Java 17+ for its embedded ZooKeeper")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        _demo_command(tmp),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_demo_env(tmp, COLUMNS="120", LINES="40", TERM="xterm"),
        start_new_session=True,
        preexec_fn=_as_a_foreground_job,
    )
    os.close(slave)
    try:
        # The view is up once it has drawn a move, and drawn it more than once (redrawn in place).
        head = _read_pty_until(master, b"shedding:", 90)
        assert b"with reasons" in head and b"shedding:" in head, head[-3000:]
        head += _read_pty_until(master, b"\x1b[2K", 10)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            sigs = _signal_state(proc.pid)
            os.kill(proc.pid, signal.SIGUSR1)
            stacks = _read_pty_until(master, b"\x00never", 3).decode(errors="replace")
            pytest.fail(f"no exit within 30 s of SIGINT ({sigs}); its threads:\n{stacks[-12000:]}")
        took = time.monotonic() - sent
        rest = _read_pty_until(master, b"ZooKeeper are down", 5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    out = (head + rest).decode(errors="replace")
    assert "\x1b[2K" in out, "the table is not redrawn in place"  # rich Live erases its lines to redraw
    assert took < PROMPT_BACK_S, f"prompt back after {took:.1f} s"
    assert proc.returncode == 0 and "Traceback" not in out, out[-3000:]
    deadline = time.monotonic() + 2
    while _processes_mentioning(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_mentioning(str(tmp))
    assert list(tmp.iterdir()) == []


def test_the_embedded_zookeeper_dies_with_a_killed_demo(tmp_path: Path) -> None:
    """Its own session keeps the JVM out of Ctrl-C's reach; the parent-death signal still takes it
    down when the demo dies without a chance to stop it (kill -9)."""
    from service.zookeeper.server.process import die_with_parent_prefix

    if shutil.which("java") is None or not die_with_parent_prefix():
        pytest.skip("needs Java and util-linux setpriv with --pdeathsig")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _start_demo(tmp)
    try:
        _wait_for_line(proc, "REST API at", 90)
        assert _processes_mentioning(str(tmp))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _processes_mentioning(str(tmp)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _processes_mentioning(str(tmp)), "the JVM outlived its parent"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
