"""Java numeric semantics that Pulsar's decisions depend on at their boundaries.

Pulsar computes resource percentages in 32-bit float and truncates budgets with Java's ``(int)``
cast; several of its own tests sit exactly on a threshold, so both effects must be reproduced.
"""

from __future__ import annotations

import math
import struct

_F32 = struct.Struct("<f")
INT_MAX = 2147483647
INT_MIN = -2147483648


def f32(x: float) -> float:
    """Round a double to the nearest IEEE-754 single (what a Java ``(float)`` cast does)."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return float(_F32.unpack(_F32.pack(x))[0])
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def percent_usage(usage: float, limit: float) -> float:
    """Pulsar's ``ResourceUsage.percentUsage()``: usage/limit*100 in float32, 0 when limit <= 0."""
    if limit <= 0:
        return 0.0
    u, lim = f32(usage), f32(limit)
    if lim == 0.0:
        # A positive double below float's range casts to 0f; Java's float division by zero gives
        # NaN or a signed infinity where Python would raise (a garbage report must not stop a cycle).
        return math.nan if u == 0.0 or math.isnan(u) else math.copysign(math.inf, u)
    # A double division rounded once to float equals Java's float division (53 >= 2*24+2 bits).
    return f32(f32(u / lim) * f32(100.0))


def java_int(x: float) -> int:
    """Java's ``(int)`` of a double: truncate toward zero, NaN -> 0, saturate at the int range."""
    if math.isnan(x):
        return 0
    if x >= INT_MAX:
        return INT_MAX
    if x <= INT_MIN:
        return INT_MIN
    return int(x)
