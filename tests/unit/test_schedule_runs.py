"""The leader's schedule counts and logs, in its own words, every run the scheduler starts,
finishes, or does not start: what the serve bench and ``/metrics`` count cycles from."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from balancer.config import LoadBalancerConfig
from service.api.metrics import PrometheusMetrics
from service.leader.schedule import JOB_NAMES, LeaderSchedule


def wait_for(pred: Callable[[], bool], timeout: float, interval: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def test_runs_are_counted_logged_and_exported_and_overlaps_are_seen(caplog: pytest.LogCaptureFixture) -> None:
    metrics = PrometheusMetrics(cluster="c1")
    schedule = LeaderSchedule(metrics.job_run)
    release = threading.Event()
    shedding_runs = 0

    def shedding() -> None:
        nonlocal shedding_runs
        shedding_runs += 1
        if shedding_runs == 2:
            release.wait(5)  # longer than the interval: the next due run finds it still going

    config = LoadBalancerConfig.from_dict({"loadBalancerSheddingIntervalMinutes": 0.2 / 60})
    funcs = {name: (lambda: None) for name in JOB_NAMES} | {"shedding": shedding}
    schedule.apply(config, funcs, leading=True)
    # Another schedule in the same process, as the e2e tier's session-wide demo is: its runs are
    # logged by the same logger and must not be counted as this one's.
    other = LeaderSchedule()
    other.apply(config, dict.fromkeys(JOB_NAMES, lambda: None), leading=True)
    caplog.set_level(logging.INFO, logger="service.leader.schedule")
    try:
        other.start()
        schedule.start()
        wait_for(lambda: schedule.runs.get(("shedding", "max_instances"), 0) >= 1, 10, 0.05, "an overlap")
        release.set()
        wait_for(lambda: schedule.runs.get(("shedding", "executed"), 0) >= 3, 10, 0.05, "three runs")
    finally:
        schedule.shutdown()
        other.shutdown()
    time.sleep(0.3)  # a run cut by the shutdown may still report
    runs = dict(schedule.runs)
    assert runs[("shedding", "executed")] <= runs[("shedding", "started")] <= shedding_runs + 1
    # Only this schedule's records: a session-wide demo of another test module may share the process.
    records = [
        r
        for r in caplog.records
        if r.name == "service.leader.schedule" and getattr(r, "leader_schedule", None) == id(schedule)
    ]
    foreign = [r for r in caplog.records if r.name == "service.leader.schedule" and r not in records]
    # The other schedule's runs were there and told apart (the e2e tier's demo may add its own).
    assert any(getattr(r, "leader_schedule", None) == id(other) for r in foreign)
    lines = [r.getMessage() for r in records]
    started = [m for m in lines if m.startswith("scheduled shedding run due") and m.endswith(" started")]
    executed = [m for m in lines if m.startswith("scheduled shedding run due") and m.endswith(" executed")]
    skipped = [r for r in records if "not started: its previous run still running" in r.getMessage()]
    assert len(started) == runs[("shedding", "started")]
    assert len(executed) == runs[("shedding", "executed")]
    assert skipped and all(r.levelno == logging.WARNING for r in skipped)
    assert not any(m.startswith("scheduled reconcile") for m in lines)  # other jobs' runs: DEBUG only
    for outcome in ("started", "executed", "max_instances"):
        labels = {"cluster": "c1", "job": "shedding", "outcome": outcome}
        got = metrics.registry.get_sample_value("loadmgr_scheduler_job_runs_total", labels)
        assert got == runs[("shedding", outcome)], outcome
    missed = {"cluster": "c1", "job": "shedding", "outcome": "missed"}
    assert metrics.registry.get_sample_value("loadmgr_scheduler_job_runs_total", missed) == 0
