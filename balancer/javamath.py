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


F32_MAX = 3.4028234663852886e38


def percent_usage(usage: float, limit: float) -> float:
    """Pulsar's ``ResourceUsage.percentUsage()``: usage/limit*100 in float32, 0 when limit <= 0.

    A positive limit that rounds to 0 in float32 (1e-50) counts as no limit, as a limit <= 0 does:
    Java would divide by zero into Infinity or NaN. A result beyond float32 range saturates at its
    largest value where Java gives Infinity, so no later subtraction or int() meets an infinity."""
    fl = f32(limit)
    if not fl > 0:  # also refuses NaN
        return 0.0
    fu = f32(usage)
    if math.isnan(fu):
        return 0.0
    # A double division rounded once to float equals Java's float division (53 >= 2*24+2 bits).
    pct = f32(f32(fu / fl) * f32(100.0))
    if math.isnan(pct):  # infinite usage over infinite limit
        return 0.0
    return max(-F32_MAX, min(F32_MAX, pct))


def java_int(x: float) -> int:
    """Java's ``(int)`` of a double: truncate toward zero, NaN -> 0, saturate at the int range."""
    if math.isnan(x):
        return 0
    if x >= INT_MAX:
        return INT_MAX
    if x <= INT_MIN:
        return INT_MIN
    return int(x)
