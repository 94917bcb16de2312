"""Shared fixtures: a real ZooKeeper for integration tests, found or started on demand.

`zk_hosts` picks, in order: $ZK_HOSTS (an existing ensemble), a `zookeeper:3.9`
container when a Docker engine answers, or an EmbeddedZooKeeper run from the jars
in the pyspark wheel (needs only Java 17+). All fixtures are lazy, so unit tests
that do not ask for them never touch Docker or Java.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

# The project is not necessarily pip-installed into the venv; make `service` and
# `balancer` importable however pytest is invoked (`pytest` vs `python -m pytest`).
_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from service.zookeeper.server.launcher import EmbeddedZooKeeper, four_letter_word  # noqa: E402
from tests.scheduling import LONGEST_FIRST, make_scheduler, scope_of, xdist_order  # noqa: E402
from tests.timing import time_factor  # noqa: E402

# A demo started by a test records its addresses where CLI verbs look (service/demo/state.py): never in
# the user's ~/.loadmgr, where a demo they run by hand keeps its own; and no CLI call of a test finds
# the user's demo either. One file per test process (xdist workers each import this).
if "LOADMGR_DEMO_STATE" not in os.environ or not os.environ.get("LOADMGR_TEST_KEEP_DEMO_STATE"):
    import tempfile

    os.environ["LOADMGR_DEMO_STATE"] = os.path.join(tempfile.mkdtemp(prefix="loadmgr-test-"), "demo.json")

log = logging.getLogger(__name__)


def _private_kazoo_rng() -> None:
    """kazoo's connection thread draws its select timeouts' and retries' jitter from the global
    ``random`` module on every packet; when a watch fires while Hypothesis generates an example
    (the fuzz and schemathesis tests), Hypothesis sees the global state change and warns that a
    strategy used ``random``. A private generator per module keeps kazoo's jitter (the same
    distribution) out of the global state; nothing else about the client changes."""
    import random

    import kazoo.protocol.connection
    import kazoo.retry

    for module in (kazoo.protocol.connection, kazoo.retry):
        module.random = random.Random()  # type: ignore[attr-defined]


_private_kazoo_rng()

ZK_IMAGE = "zookeeper:3.9"
ZK_CLIENT_TIMEOUT_S = 15.0

ZkClientFactory = Callable[..., KazooClient]


def _docker_engine_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        # No SDK, no socket, daemon down, permission denied: all mean "no Docker".
        return False


def _wait_until_serving(host: str, port: int, timeout: float) -> None:
    # "binding to port" is logged before the database is loaded; a client arriving
    # in that window is dropped, so wait until `srvr` reports a Mode as well.
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            if "Mode:" in four_letter_word(host, port, "srvr", timeout=1.0):
                return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"ZooKeeper container at {host}:{port} never started serving")
        time.sleep(0.1)


@contextlib.contextmanager
def _zookeeper_container() -> Iterator[str]:
    # testcontainers has no ZooKeeper module, hence a generic container.
    from testcontainers.core.container import DockerContainer

    container = (
        DockerContainer(ZK_IMAGE)
        .with_exposed_ports(2181)
        .with_env("ZOO_TICK_TIME", "500")
        .with_env("ZOO_4LW_COMMANDS_WHITELIST", "ruok,mntr,srvr")
        .with_env("ZOO_ADMINSERVER_ENABLED", "false")
        .with_env("ZOO_CFG_EXTRA", "minSessionTimeout=1000 maxSessionTimeout=60000")
    )
    try:
        try:
            # Newer testcontainers have wait strategies (wait_for_logs with a string is
            # deprecated there); older 4.x releases only have wait_for_logs.
            from testcontainers.core.wait_strategies import LogMessageWaitStrategy
        except ImportError:
            from testcontainers.core.waiting_utils import wait_for_logs

            container.start()
            wait_for_logs(container, "binding to port", timeout=60)
        else:
            container.waiting_for(LogMessageWaitStrategy("binding to port").with_startup_timeout(60))
            container.start()
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(2181))
        _wait_until_serving(host, port, timeout=30)
        yield f"{host}:{port}"
    finally:
        # Also after a failed start, which can leave a created container behind.
        with contextlib.suppress(Exception):
            container.stop()


@pytest.fixture(scope="session")
def zk_hosts() -> Iterator[str]:
    """Connection string of a ZooKeeper shared by the whole test session."""
    env_hosts = os.environ.get("ZK_HOSTS")
    if env_hosts:
        yield env_hosts
        return
    with contextlib.ExitStack() as stack:
        hosts: str | None = None
        if _docker_engine_answers():
            try:
                hosts = stack.enter_context(_zookeeper_container())
            except Exception as exc:
                # e.g. offline with the image not cached: the embedded server still works.
                log.warning("could not start %s container (%s); using EmbeddedZooKeeper", ZK_IMAGE, exc)
        if hosts is None:
            hosts = stack.enter_context(EmbeddedZooKeeper()).hosts
        yield hosts


@pytest.fixture
def zk_server() -> Iterator[EmbeddedZooKeeper]:
    """A private EmbeddedZooKeeper per test, for tests that pause or kill the server."""
    with EmbeddedZooKeeper() as zk:
        yield zk


@pytest.fixture(scope="session")
def _zk_admin(zk_hosts: str) -> Iterator[KazooClient]:
    # Unchrooted client that creates and removes the per-test chroots: ZooKeeper
    # does not create a chroot node by itself, and a shared ensemble ($ZK_HOSTS)
    # must not fill up with test leftovers.
    client = KazooClient(hosts=zk_hosts, timeout=ZK_CLIENT_TIMEOUT_S)
    client.start(timeout=ZK_CLIENT_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_chroot_hosts(zk_hosts: str, _zk_admin: KazooClient) -> Iterator[str]:
    """`zk_hosts` plus a fresh `/t-<uuid>` chroot, deleted again after the test."""
    chroot = f"/t-{uuid.uuid4().hex}"
    _zk_admin.ensure_path(chroot)
    try:
        yield f"{zk_hosts}{chroot}"
    finally:
        with contextlib.suppress(Exception):
            _zk_admin.delete(chroot, recursive=True)


@pytest.fixture
def zk_client_factory(zk_chroot_hosts: str) -> Iterator[ZkClientFactory]:
    """Make extra started clients on the test's chroot; whatever is left is closed after."""
    clients: list[KazooClient] = []

    def make(**kwargs: object) -> KazooClient:
        kwargs.setdefault("timeout", ZK_CLIENT_TIMEOUT_S)
        client = KazooClient(hosts=zk_chroot_hosts, **kwargs)
        clients.append(client)
        client.start(timeout=ZK_CLIENT_TIMEOUT_S)
        return client

    yield make
    for client in clients:
        # stop() on an already stopped client is a no-op, so tests may close their own.
        with contextlib.suppress(Exception):
            client.stop()
            client.close()


@pytest.fixture
def zk_client(zk_client_factory: ZkClientFactory) -> KazooClient:
    """A started KazooClient confined to a unique chroot of `zk_hosts`."""
    return zk_client_factory()


# The order of a serial run (`LOADMGR_TEST_WORKERS=0`): the pure tier first (it fails fastest, and
# its Hypothesis tests run before any kazoo client thread draws from the global `random`), then the
# longest modules, longest first. Under `make test` (`--dist loadfile`) xdist's workers collect in
# tests/scheduling.py's order instead (long units of work first, modules sharing a costly set-up
# together), and its scheduler hands the units out in that order. (Runs with the collection order kept
# once had the Ctrl-C tests time out: the suite ran with SIGINT ignored and the order decided whether
# another test had replaced that by accident; tests/e2e/test_ctrl_c.py now gives the demo SIGINT's
# default itself.)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    paths = [Path(str(item.path)).relative_to(_ROOT).as_posix() for item in items]
    if hasattr(config, "workerinput"):  # an xdist worker (whose own `dist` option reads "no")
        order = xdist_order(paths)
    else:
        long_rank = {scope: r for r, scope in enumerate(LONGEST_FIRST)}

        def rank(i: int) -> int:
            if paths[i].startswith("tests/unit/"):
                return -1
            return long_rank.get(scope_of(paths[i]), len(LONGEST_FIRST))

        order = sorted(range(len(items)), key=rank)  # stable: the order within and among the others is kept
    items[:] = [items[i] for i in order]
    _scale_timeouts(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` (make test): tests/scheduling.py's units of work, long ones first."""
    if config.getvalue("dist") != "loadfile":
        return None
    return make_scheduler(config, log)


def _scale_timeouts(items: list[pytest.Item]) -> None:
    """pytest-timeout's limits (``timeout`` in pyproject.toml, or a test's own ``timeout`` mark) are
    budgets for a quiet machine: each test gets its limit times :func:`tests.timing.time_factor`,
    taken at collection, so a loaded machine stretches the limit instead of failing the test."""
    factor = time_factor()
    if factor == 1.0:
        return
    try:
        base = float(items[0].config.getini("timeout") or 0) if items else 0.0
    except (ValueError, KeyError):
        base = 0.0
    for item in items:
        mark = item.get_closest_marker("timeout")
        seconds = float(mark.args[0]) if mark is not None and mark.args else base
        if seconds > 0:
            kwargs = dict(mark.kwargs) if mark is not None else {}  # func_only, method stay
            item.add_marker(pytest.mark.timeout(seconds * factor, **kwargs), append=False)  # closest wins
