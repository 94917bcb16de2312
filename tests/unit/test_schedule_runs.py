"""The leader's schedule counts and logs, in its own words, every run the scheduler starts,
finishes, or does not start: what the serve bench and ``/metrics`` count cycles from. Runs are at a
fixed delay, as Pulsar's ``LoadSheddingTask`` schedules them: a long run delays the next, none is
dropped and none overlaps."""

from __future__ import annotations

import itertools
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


def test_runs_are_counted_logged_and_exported_and_a_long_run_delays_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = PrometheusMetrics(cluster="c1")
    schedule = LeaderSchedule(metrics.job_run)
    release = threading.Event()
    shedding_runs = 0
    running = 0
    overlaps = 0
    spans: list[tuple[float, float]] = []  # each run's start and end

    def shedding() -> None:
        nonlocal shedding_runs, running, overlaps
        start = time.monotonic()
        running += 1
        overlaps += running > 1
        shedding_runs += 1
        try:
            if shedding_runs == 2:
                release.wait(5)  # many intervals long: the runs that would fall due meanwhile wait
        finally:
            running -= 1
            spans.append((start, time.monotonic()))

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
        wait_for(lambda: shedding_runs >= 2, 10, 0.05, "the long run")
        # Hold it five intervals (progress, not time: the scheduler is what is being waited on).
        held = time.monotonic()
        wait_for(lambda: time.monotonic() - held >= 1.0, 10, 0.05, "five intervals")
        release.set()
        wait_for(lambda: schedule.runs.get(("shedding", "executed"), 0) >= 4, 10, 0.05, "four runs")
    finally:
        schedule.shutdown()
        other.shutdown()
    time.sleep(0.3)  # a run cut by the shutdown may still report
    runs = dict(schedule.runs)
    assert runs[("shedding", "executed")] <= runs[("shedding", "started")] <= shedding_runs + 1
    assert overlaps == 0 and runs.get(("shedding", "max_instances"), 0) == 0
    # Fixed delay: each run starts at least one interval (0.2 s) after the previous one ended, so
    # the long run's neighbours are spaced by it, and no run was due (or dropped) while it went.
    ordered = sorted(spans)
    assert all(b[0] - a[1] >= 0.2 - 0.02 for a, b in itertools.pairwise(ordered[:4]))
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
    skipped = [r for r in records if "not started" in r.getMessage()]
    assert len(started) == runs[("shedding", "started")]
    assert len(executed) == runs[("shedding", "executed")]
    assert skipped == []
    assert not any(m.startswith("scheduled reconcile") for m in lines)  # other jobs' runs: DEBUG only
    for outcome in ("started", "executed"):
        labels = {"cluster": "c1", "job": "shedding", "outcome": outcome}
        got = metrics.registry.get_sample_value("loadmgr_scheduler_job_runs_total", labels)
        assert got == runs[("shedding", outcome)], outcome
    missed = {"cluster": "c1", "job": "shedding", "outcome": "missed"}
    assert metrics.registry.get_sample_value("loadmgr_scheduler_job_runs_total", missed) == 0


def test_a_wake_during_a_run_runs_again_after_it_and_a_pause_during_a_run_stops_the_job() -> None:
    schedule = LeaderSchedule()
    gate = threading.Event()
    calls = 0

    def reconcile() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            gate.wait(5)

    # A long interval: any run after the first comes from the wake, not from the interval.
    config = LoadBalancerConfig.from_dict({"loadBalancerSheddingIntervalMinutes": 10})
    funcs = dict.fromkeys(JOB_NAMES, lambda: None) | {"reconcile": reconcile}
    schedule.apply(config, funcs, leading=True)
    try:
        schedule.start()
        schedule.wake("reconcile")
        wait_for(lambda: calls == 1, 10, 0.02, "the first run")
        schedule.wake("reconcile")  # during the run: not dropped, run right after it
        gate.set()
        wait_for(lambda: calls == 2, 10, 0.02, "the woken run after the first")
        assert schedule.runs.get(("reconcile", "max_instances"), 0) == 0
        gate.clear()
        calls = 0
        schedule.wake("reconcile")
        wait_for(lambda: calls == 1, 10, 0.02, "a run to pause under")
        schedule.pause()  # leadership lost mid-run: the run's end must not schedule the next
        schedule.wake("reconcile")
        gate.set()
        wait_for(lambda: schedule.runs.get(("reconcile", "executed"), 0) >= 3, 10, 0.02, "the run's end")
        job = schedule._scheduler.get_job("reconcile")
        assert job is not None and job.next_run_time is None
    finally:
        schedule.shutdown()
