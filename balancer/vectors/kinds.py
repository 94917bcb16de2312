"""Handlers of the non-shedder vector kinds, keyed by the vector's ``kind`` member.

Each handler takes the parsed vector and returns one :class:`RoundReport` per checked case.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from balancer.vectors.report import RoundReport

KindHandler = Callable[[str, dict[str, Any]], list[RoundReport]]

KIND_HANDLERS: dict[str, KindHandler] = {}
