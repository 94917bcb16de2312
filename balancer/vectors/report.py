"""Result types of a vector run."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RoundReport:
    """One checked round (or case) of a vector: passed, with a readable diff when not."""

    vector: str
    round: str
    passed: bool
    diff: list[str] = field(default_factory=list)

    def line(self) -> str:
        head = f"{'PASS' if self.passed else 'FAIL'} {self.vector} [{self.round}]"
        return head if self.passed else head + "\n" + "\n".join("    " + d for d in self.diff)
