"""Keeping HiGHS's stray line off the process's standard output (issue 49).

The least-move planner solves through scipy's ``milp``, and scipy 1.17.1 (the newest release) bundles
HiGHS 1.12.0. When that HiGHS's MIP solver finds an incumbent that is infeasible once presolve is undone,
it solves a repair LP and, just before, calls ``puts("HighsMipSolverData::transformNewIntegerFeasibleSolution
tmpSolver.run();")``: unconditionally, so no option (``disp``, ``output_flag``, ``log_to_console``) reaches
it. It surfaced in bench/quality.py's output and in live leaders' stdout, and would land in the middle of
``loadmgr simulate``'s JSON. HiGHS 1.13 dropped the call; no scipy release bundles that yet.

The line goes through C stdio's ``stdout`` stream, which nothing else in this process writes to: Python's
own output (print, logging, uvicorn's access log) writes fd 1 directly. So for the duration of each solve
this points the C library's ``stdout`` at /dev/null, and back after; glibc documents ``stdin``, ``stdout``
and ``stderr`` as ordinary variables a program may set. fd 1 itself is never touched: no other thread's
output is held or lost, and a child process started meanwhile inherits the real stdout. (Redirecting
fd 1 around the solve instead would have held every thread's output for up to the planner's time limit,
and given a child started meanwhile the temporary file for good.) What a solve's window does drop is
C-level stdio output of another thread, of which this process has none. Solves in several threads may
overlap: the first to start swaps the stream, the last to finish swaps it back.

Only on glibc: musl declares ``stdout`` const (writing it would fault), and elsewhere the symbol differs;
there :func:`install` changes nothing and says so (HiGHS's line can then still appear).
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from balancer.shedding.least_move import set_solve_guard

log = logging.getLogger(__name__)


class QuietCStdout:
    """C's ``stdout`` pointed at /dev/null while any :meth:`solve` window is open."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None)  # the process's global scope: the ``stdout`` every library is bound to
        self._stdout = ctypes.c_void_p.in_dll(libc, "stdout")
        fopen = libc.fopen
        fopen.restype = ctypes.c_void_p
        fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        # Opened once and never closed: a thread that read the pointer during a window may still be
        # writing through it after the window closes.
        null = fopen(os.devnull.encode(), b"w")
        if not null:
            raise OSError(ctypes.get_errno(), f"fopen({os.devnull})")
        self._null: int = null
        self._lock = threading.Lock()
        self._open = 0
        self._saved: int | None = None

    @contextmanager
    def solve(self) -> Iterator[None]:
        with self._lock:
            if self._open == 0:
                self._saved = self._stdout.value
                self._stdout.value = self._null
            self._open += 1
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1
                if self._open == 0:
                    self._stdout.value = self._saved


_installed: QuietCStdout | None = None
_tried = False
_install_lock = threading.Lock()


def quiet_solve() -> AbstractContextManager[object]:
    """The window one solve runs in (nothing where :func:`install` could not set one up)."""
    guard = install()
    return guard.solve() if guard is not None else nullcontext()


def install() -> QuietCStdout | None:
    """Make every later least-move solve in this process run with C's stdout at /dev/null (idempotent);
    None where the C library is not glibc or its ``stdout`` cannot be reached."""
    global _installed, _tried
    with _install_lock:
        if _tried:
            if _installed is not None:
                set_solve_guard(_installed.solve)
            return _installed
        _tried = True
        if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
            log.info("HiGHS's stray stdout line is not suppressed: the C library is not glibc")
            return None
        try:
            _installed = QuietCStdout()
        except (OSError, ValueError) as e:
            log.warning("HiGHS's stray stdout line is not suppressed: %s", e)
            return None
        set_solve_guard(_installed.solve)
        return _installed
