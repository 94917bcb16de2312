"""How long a test may wait for something: a base budget times :func:`time_factor`.

Tests wait on conditions and measure progress (cycles run, scenarios done), not elapsed time; where a
budget must exist (a deadline for a condition, so a broken build fails instead of hanging), it is
written for a quiet 2-core machine and multiplied by the factor:

* ``LOADMGR_TEST_TIME_FACTOR`` (a number >= 1) when set, e.g. on a CI machine known to be shared;
* else the machine's 1-minute load average per CPU, at least 1 and at most 10 (read when the budget
  is taken, so a load that rises during the run stretches the later waits). A quiet machine keeps
  the base budgets; two cores at a load average of 16 get 8 times as long.
"""

from __future__ import annotations

import os

MAX_AUTO_FACTOR = 10.0


def time_factor() -> float:
    given = os.environ.get("LOADMGR_TEST_TIME_FACTOR", "").strip()
    if given:
        try:
            return max(1.0, float(given))
        except ValueError:
            raise ValueError(f"LOADMGR_TEST_TIME_FACTOR={given!r}: expected a number >= 1") from None
    try:
        per_cpu = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 1.0
    return min(max(1.0, per_cpu), MAX_AUTO_FACTOR)


def scaled(seconds: float) -> float:
    """``seconds`` (a budget on a quiet machine) for this machine now."""
    return seconds * time_factor()
