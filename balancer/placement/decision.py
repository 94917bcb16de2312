"""What the placement pipeline answers: the broker, why, and each filter's explained step."""

from __future__ import annotations

from typing import Any

from balancer.explain import Explanation


class PlacementDecision:
    """The chosen broker (None: nobody), the final reason, and every filter's step in order.

    ``explanation``, ``filter_steps`` and ``candidates`` are properties so that a leader cycle's
    decisions (``pipeline.CycleDecision``) can build them on first read: a cycle places tens of
    thousands of bundles and reads none of them.
    """

    __slots__ = ("_candidates", "_explanation", "_steps", "broker")

    def __init__(
        self,
        broker: str | None,
        explanation: Explanation | None,
        filter_steps: list[Explanation] | None = None,
        candidates: list[str] | None = None,
    ) -> None:
        self.broker = broker
        self._explanation = explanation
        self._steps = filter_steps
        self._candidates = candidates

    @property
    def explanation(self) -> Explanation:
        assert self._explanation is not None
        return self._explanation

    @property
    def filter_steps(self) -> list[Explanation]:
        if self._steps is None:
            self._steps = []
        return self._steps

    @property
    def candidates(self) -> list[str]:
        if self._candidates is None:
            self._candidates = []
        return self._candidates

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlacementDecision):
            return NotImplemented
        return (self.broker, self.explanation, self.filter_steps, self.candidates) == (
            other.broker,
            other.explanation,
            other.filter_steps,
            other.candidates,
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[PlacementDecision], tuple[Any, ...]]:
        return PlacementDecision, (self.broker, self.explanation, self.filter_steps, self.candidates)

    def __repr__(self) -> str:
        return f"PlacementDecision(broker={self.broker!r}, explanation={self.explanation!r})"
