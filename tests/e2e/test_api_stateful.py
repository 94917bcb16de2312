"""Stateful schemathesis run of the live API, chaining calls through the schema's OpenAPI links.

On ``scratch_demo`` (real embedded ZooKeeper, a leader serving REST, simulated brokers reporting), so
the unloads, splits and namespace changes the run makes stay out of the demo other e2e tests check.
Each scenario starts at a producer (``GET /brokers``, ``GET /bundles``, ``POST /namespaces/..``,
``GET /lookup/..``) and follows links to consumers with the values that came back, so mutations act on
bundles and namespaces that exist. Every response is checked: no 5xx, the status code, content type
and body as the schema declares them. Requests carry the admin token, as an operator's client would.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.demo.cluster import Demo
from tests.e2e.conftest import TOKEN
from tests.timing import scaled

pytestmark = pytest.mark.e2e

AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
SCENARIOS = 60
STEPS = 6
# A deadline only so that a broken build fails instead of looping: on a quiet machine the required
# calls come within seconds; the budget is scaled by tests.timing.time_factor() (load average per CPU,
# or LOADMGR_TEST_TIME_FACTOR), and the run stops as soon as the coverage below is reached.
BUDGET_S = 120.0
# Calls that must have succeeded at least once: the links were followed to things that exist.
REQUIRED_OK = ("GET /brokers/{broker}", "GET /bundles/{bundle}", "POST /namespaces/{tenant}/{namespace}")
MUTATED_OK = {"POST /bundles/{bundle}/unload", "POST /bundles/{bundle}/split"}


def test_linked_call_sequences_get_no_server_error_and_conform(scratch_demo: Demo) -> None:
    url = scratch_demo.url
    # the token is really required: a mutation without it is refused
    with httpx.Client(base_url=url, timeout=20.0) as c:
        assert c.post("/shedding/dry-run").status_code in (200, 503)  # reads are open in the demo
        assert c.put("/config", json={}).status_code == 401
        wait_until_brokers_report(c, 2)
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    calls: Counter[tuple[str, int]] = Counter()
    failures: list[str] = []
    scenarios = [0]

    class LiveAPI(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            scenarios[0] += 1

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": url, "headers": AUTH}

        def after_call(self, response: Any, case: Any) -> None:
            calls[(case.operation.label, response.status_code)] += 1

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            # Collected, not raised: against a live cluster that every step changes, Hypothesis
            # cannot replay a failing sequence (it reports FlakyStrategyDefinition instead of the
            # failure), so each failure is kept with the request that caused it.
            kwargs.pop("additional_checks", None)
            try:
                case.validate_response(response, checks=CHECKS, headers=AUTH, transport_kwargs=kwargs)
            except Exception as e:  # FailureGroup and the checks' AssertionErrors
                request = response.request
                failures.append(f"{case.operation.label} {request.url} {request.body!r}: {e}"[:2000])

    def covered() -> bool:
        ok = {label for (label, status), _ in calls.items() if 200 <= status < 300}
        return all(label in ok for label in REQUIRED_OK) and bool(MUTATED_OK & ok)

    # Hypothesis replays choice prefixes and expects the same rules to be available; a live cluster
    # that each step changes breaks that (Flaky), which ends a run but is no finding: schemathesis's
    # own engine treats it the same way. Runs repeat until enough scenarios ran and the required calls
    # succeeded (progress, however long a loaded machine takes for it), or the scaled budget is spent.
    deadline = time.monotonic() + scaled(BUDGET_S)
    runs = 0
    while (scenarios[0] < SCENARIOS or not covered()) and time.monotonic() < deadline:
        runs += 1
        with contextlib.suppress(Flaky):
            LiveAPI.run(
                settings=settings(
                    max_examples=SCENARIOS,
                    stateful_step_count=STEPS,
                    deadline=None,
                    database=None,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
            )
    assert scenarios[0] >= SCENARIOS // 2, (scenarios, runs)
    assert not failures, "\n\n".join(failures[:5])
    print(f"{scenarios[0]} scenarios in {runs} run(s):", dict(sorted(calls.items())))
    ok = {label for (label, status), _ in calls.items() if 200 <= status < 300}
    # the links were followed to things that exist, not only to 404s: real brokers and bundles read,
    # a namespace created, and a real bundle unloaded or split
    report = "\n".join(f"{k}: {v}" for k, v in sorted(calls.items()))
    for label in REQUIRED_OK:
        assert label in ok, report
    assert MUTATED_OK & ok, report
    assert not [k for k in calls if k[1] >= 500]


def wait_until_brokers_report(client: httpx.Client, n: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        if len(client.get("/brokers", headers=AUTH).json()) >= n:
            return
        time.sleep(0.25)
    raise AssertionError(f"fewer than {n} brokers reporting after {timeout_s}s")
