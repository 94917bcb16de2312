"""Handlers of the non-shedder vector kinds, keyed by the vector's ``kind`` member.

Each handler takes the vector's name and parsed JSON and returns one :class:`RoundReport` per
checked case; within a kind it dispatches on the vector's shape (config ``strategy``/``filter``/
``algorithm``/``operation``, or input members), since the shapes differ per scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from balancer.vectors.kinds_loaddata import (
    handle_report_cadence,
    handle_report_update,
    handle_time_average,
)
from balancer.vectors.kinds_placement import handle_placement
from balancer.vectors.kinds_policies import handle_split_unload
from balancer.vectors.kinds_split import (
    handle_split_algorithm,
    handle_split_condition,
    handle_topic_to_bundle,
)
from balancer.vectors.report import RoundReport

KindHandler = Callable[[str, dict[str, Any]], list[RoundReport]]

KIND_HANDLERS: dict[str, KindHandler] = {
    "placement": handle_placement,
    "report_update": handle_report_update,
    "time_average": handle_time_average,
    "split_condition": handle_split_condition,
    "split_algorithm": handle_split_algorithm,
    "topic_to_bundle": handle_topic_to_bundle,
    "split_unload": handle_split_unload,
    "report_cadence": handle_report_cadence,
}
