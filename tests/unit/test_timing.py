"""The test budgets' factor (tests/timing.py): explicit, or the load average per CPU, within bounds."""

from __future__ import annotations

import os

import pytest

from tests.timing import MAX_AUTO_FACTOR, scaled, time_factor


def test_an_explicit_factor_scales_every_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADMGR_TEST_TIME_FACTOR", "3")
    assert scaled(10) == 30
    monkeypatch.setenv("LOADMGR_TEST_TIME_FACTOR", "0.1")  # never shorter than the quiet budget
    assert scaled(10) == 10
    monkeypatch.setenv("LOADMGR_TEST_TIME_FACTOR", "lots")
    with pytest.raises(ValueError, match="LOADMGR_TEST_TIME_FACTOR"):
        time_factor()


def test_the_automatic_factor_follows_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOADMGR_TEST_TIME_FACTOR", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    for load, factor in ((0.5, 1.0), (4.0, 2.0), (16.0, 8.0), (100.0, MAX_AUTO_FACTOR)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert time_factor() == factor
