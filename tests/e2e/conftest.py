"""A running demo cluster for the e2e tests: embedded ZooKeeper, a leader serving REST, simulated
brokers that start skewed. Started once per session in this process and reached over real HTTP."""

from __future__ import annotations

import io
import shutil
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.demo.cluster import Demo, DemoOptions
from tests.timing import scaled

TOKEN = "e2e-secret"
BALANCE_TIMEOUT_S = 120.0


def running_demo(opts: DemoOptions) -> Iterator[Demo]:
    """A started demo with ``opts`` (output kept in a buffer), stopped when the generator closes: the
    body of every demo fixture. Skips where there is no Java for its embedded ZooKeeper."""
    if shutil.which("java") is None:
        pytest.skip("the demo needs Java 17+ for its embedded ZooKeeper")
    d = Demo(opts, out=io.StringIO())
    try:
        d.start()
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="session")
def demo() -> Iterator[Demo]:
    if shutil.which("java") is None:
        pytest.skip("the demo needs Java 17+ for its embedded ZooKeeper")
    d = Demo(DemoOptions(brokers=3, bundles=9, port=0, token=TOKEN, shed_interval_s=3.0), out=io.StringIO())
    try:
        d.start()
        d.balanced_within = d.wait_balanced(BALANCE_TIMEOUT_S)  # type: ignore[attr-defined]
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="session")
def scratch_demo() -> Iterator[Demo]:
    """A second, small demo for the API fuzzers, whose random unloads, splits and namespaces (up to
    1,024 bundles each) would otherwise change the cluster and flood the decision log that the
    behavioural tests on ``demo`` check. Not waited on to balance: brokers report, that is enough."""
    opts = DemoOptions(brokers=2, bundles=4, port=0, token=TOKEN, shed_interval_s=3.0, publish_state=False)
    yield from running_demo(opts)


@pytest.fixture
def api(demo: Demo) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=demo.url, timeout=20.0) as c:
        yield c


@pytest.fixture
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def _wait_for(fn: Any, timeout_s: float = 15.0, interval_s: float = 0.25) -> Any:
    """Poll ``fn`` until it returns something truthy; return it (or the last falsy value). The budget
    is scaled by :func:`tests.timing.time_factor`."""
    deadline = time.monotonic() + scaled(timeout_s)
    value = fn()
    while not value and time.monotonic() < deadline:
        time.sleep(interval_s)
        value = fn()
    return value


@pytest.fixture
def wait_for() -> Any:
    return _wait_for
