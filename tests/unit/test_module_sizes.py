"""Issue 49, item 11: no module grows past what one reader holds in mind; split by responsibility."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 450


def test_no_module_of_the_core_or_the_service_exceeds_the_limit() -> None:
    big = {
        str(path.relative_to(ROOT)): n
        for package in ("balancer", "service")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert big == {}, f"split these by responsibility: {big}"
