"""Explanations: every decision carries a reason code, a sentence, and the numbers behind it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

Number = float | int | str | bool | None


class Explanation(BaseModel):
    """Why something was (or was not) decided; ``numbers`` holds the inputs and thresholds used."""

    reason: str
    message: str = ""
    numbers: dict[str, Any] = Field(default_factory=dict)
    subject: str | None = None  # broker or bundle the explanation is about

    def __str__(self) -> str:
        nums = ", ".join(f"{k}={_fmt(v)}" for k, v in self.numbers.items())
        who = f"{self.subject}: " if self.subject else ""
        return f"{who}{self.reason}: {self.message}" + (f" ({nums})" if nums else "")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def explain(reason: str, message: str = "", subject: str | None = None, **numbers: Any) -> Explanation:
    return Explanation(reason=reason, message=message, numbers=numbers, subject=subject)
