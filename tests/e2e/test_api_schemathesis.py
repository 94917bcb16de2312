"""Property-based run of a running demo's OpenAPI schema: no request, valid or not, gets a 5xx.

On ``scratch_demo``: the run creates namespaces and unloads and splits bundles at random."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from service.demo.cluster import Demo

pytestmark = pytest.mark.e2e

EXAMPLES_PER_OPERATION = 15


def test_no_server_errors_on_any_operation(scratch_demo: Demo) -> None:
    demo = scratch_demo
    schema = schemathesis.openapi.from_url(f"{demo.url}/openapi.json")
    headers = {"Authorization": f"Bearer {demo.opts.token or ''}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14, [op.label for op in operations]
    calls: dict[str, int] = {}

    for op in operations:

        @given(case=op.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            calls[case.operation.label] = calls.get(case.operation.label, 0) + 1
            case.call_and_validate(base_url=demo.url, headers=headers, checks=[not_a_server_error])

        run()
    assert all(n > 0 for n in calls.values()) and len(calls) == len(operations)
