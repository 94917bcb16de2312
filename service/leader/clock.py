"""``now_ms``: the wall clock in milliseconds, as Pulsar's load data and the decision log carry time.

In its own module because the jobs, the split jobs and the service all stamp with it and the split
jobs cannot import ``jobs`` (which mixes them in) without an import cycle.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
