"""Reads the simulator's named scenarios (JSON package data in ``balancer/sim/scenario_data/``).

The pure core only parses dicts (``balancer.sim.scenarios.parse_scenario``); the file reading
lives here so ``loadmgr simulate``, ``bench/quality_named.py`` and the tests share one loader.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.abc import Traversable
from typing import Any

from balancer.errors import InvalidInput
from balancer.sim.scenarios import Scenario, parse_scenario


def _root() -> Traversable:
    return resources.files("balancer.sim") / "scenario_data"


def scenario_names() -> list[str]:
    return sorted(p.name[:-5] for p in _root().iterdir() if p.name.endswith(".json"))


def read_scenario_dict(name: str) -> dict[str, Any]:
    path = _root() / f"{name}.json"
    if not path.is_file():
        raise InvalidInput("scenario", name, f"unknown; known: {', '.join(scenario_names())}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InvalidInput(f"scenario file {name}.json", str(e), "must be valid JSON") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"scenario file {name}.json", type(data).__name__, "must be a JSON object")
    return data


def load_scenario(name: str, scale: float = 1.0, cycles: int | None = None) -> Scenario:
    """A named scenario; ``scale`` multiplies broker counts (small/medium versions for tests)."""
    return parse_scenario(read_scenario_dict(name), scale=scale, cycles=cycles)
