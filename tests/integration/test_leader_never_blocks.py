"""Plan / write / apply: while a leader job waits for its ZooKeeper batches, the service lock is free,
so manual operations, config updates and dry runs never wait for a cycle's writes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import service.leader.jobs as jobs_module
import service.leader.operations as operations_module
from balancer.cycle import Move
from balancer.errors import InvalidInput, UnknownBroker, UnknownBundle
from balancer.explain import explain
from service.broker.workload import Scenario
from service.errors import BundleBusy
from service.zookeeper import paths as P
from tests.integration.conftest import Cluster, fast_config, wait_for
from tests.timing import scaled

pytestmark = pytest.mark.integration


def _in_thread(fn: Callable[[], Any], timeout: float = 10.0) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "blocked behind the job's writes"
    return out[0]


def _raised_in_thread(fn: Callable[[], Any], timeout: float = 10.0) -> BaseException | None:
    def run() -> None:
        try:
            fn()
        except BaseException as e:  # handed to the test
            out.append(e)

    out: list[BaseException] = []
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "blocked behind the job's unload"
    return out[0] if out else None


class _RemoteAdmin:
    """An executor like Pulsar's admin API: splits computed far away, and an unload that answers once
    the far side has closed the bundle's topics (here: once the test lets it)."""

    name = "remote"
    remote_split = True

    def __init__(self, hold: str) -> None:
        self.hold = hold
        self.entered, self.release = threading.Event(), threading.Event()
        self.unloads: list[tuple[str, str | None]] = []

    def prepare(self, bundle: str, destination: str | None) -> None:
        pass

    def unload(self, bundle: str, source: str | None, destination: str | None, reason: str = "") -> None:
        self.unloads.append((bundle, destination))
        if bundle == self.hold and not self.release.is_set():
            self.entered.set()
            assert self.release.wait(30)

    def split(self, bundle: str, algorithm: str | None, positions: Any, unload: bool = False) -> list[str]:
        return []


def test_a_remote_executors_unloads_let_the_lock_go(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulsar mode: a cycle's unload waits on Pulsar's admin API for a second or more per move. The
    lock is let go meanwhile: another bundle's manual unload, a config update and a dry run go through.
    An operator's unload of the bundle being unloaded waits for that one to answer, then goes ahead;
    past ``BUSY_WAIT_S`` it is refused (409 BundleBusy), never sent to Pulsar twice at once."""
    # The fake admin moves nothing, so the cycle's move is never served: its slot is let go at once,
    # and the next cycle may send the same move again (what this test holds).
    config = fast_config(loadBalancerUnloadServedTimeoutSeconds=0.5)
    cluster.scenario(Scenario(namespaces={"first/ns": 4}))
    cluster.agent("b1:8080", config)
    cluster.agent("b2:8080", config)
    held, other = sorted(cluster.bundles())[:2]
    remote = _RemoteAdmin(held)
    real = jobs_module.plan_shedding_cycle

    def one_move(*a: Any, **kw: Any) -> Any:
        plan = real(*a, **kw)
        plan.moves = [
            Move(held, "b1:8080", "b2:8080", explain("overloaded", "the test's move", subject=held))
        ]
        return plan

    monkeypatch.setattr(jobs_module, "plan_shedding_cycle", one_move)
    svc = cluster.service("s1:7043", config, executor=remote)
    monkeypatch.setattr(operations_module, "BUSY_WAIT_S", 0.3)
    wait_for(remote.entered.is_set, 30, what="a shedding cycle's unload under way")
    try:
        assert held in svc.jobs.in_flight
        assert _raised_in_thread(lambda: svc.unload(other, "b2:8080", principal="test")) is None
        assert (other, "b2:8080") in remote.unloads
        busy = _raised_in_thread(lambda: svc.unload(held, "b1:8080", principal="test"))
        assert isinstance(busy, BundleBusy) and held in str(busy), busy
        busy = _raised_in_thread(lambda: svc.split(held, principal="test"))
        assert isinstance(busy, BundleBusy), busy
        assert (
            _raised_in_thread(
                lambda: svc.update_config({"loadBalancerBrokerOverloadedThresholdPercentage": 84})
            )
            is None
        )
        assert _raised_in_thread(svc.dry_run) is None
    finally:
        remote.release.set()
    wait_for(lambda: held not in svc.jobs.in_flight, 20, what="the cycle's unload answered")
    wait_for(
        lambda: any(d.bundle == held and d.kind == "shedding" and d.applied for d in svc.decisions()),
        20,
        what="the cycle's move recorded once its unload answered",
    )
    # Held again by the next cycle: an operator's unload of it now waits, then goes ahead.
    monkeypatch.setattr(operations_module, "BUSY_WAIT_S", 30.0)
    remote.entered.clear()
    remote.release.clear()
    wait_for(remote.entered.is_set, 30, what="the next cycle's unload under way")
    out: list[BaseException | None] = []
    waiting = threading.Thread(
        target=lambda: out.append(_raised_in_thread(lambda: svc.unload(held, "b1:8080"), 30)), daemon=True
    )
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive() and (held, "b1:8080") not in remote.unloads  # waiting, not sent
    remote.release.set()
    waiting.join(scaled(30))
    assert out == [None] and (held, "b1:8080") in remote.unloads


def _leader_over_two_brokers(cluster: Cluster, instance: str) -> Any:
    """A ready leader ``instance`` over agents b1 and b2, every bundle of first/ns (2) owned."""
    config = fast_config()
    cluster.scenario(Scenario(namespaces={"first/ns": 2}))
    cluster.agent("b1:8080", config)
    cluster.agent("b2:8080", config)
    svc = cluster.service(instance, config)
    wait_for(svc.ready, 20, what="a ready leader")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    return svc


def test_manual_operations_do_not_wait_for_a_jobs_writes(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = _leader_over_two_brokers(cluster, "s1:7041")

    entered, release = threading.Event(), threading.Event()
    real = jobs_module.commit_batches

    def held(store: Any, ops: Any, fence: Any, *a: Any, **kw: Any) -> Any:
        if any(op.path.startswith(P.ASSIGNMENTS + "/late/") for op in ops):
            entered.set()
            assert release.wait(30)
        return real(store, ops, fence, *a, **kw)

    monkeypatch.setattr(jobs_module, "commit_batches", held)
    late = cluster.admin.create_namespace("late/ns", 4).bundle_names  # orphans: the reconcile places them
    wait_for(entered.is_set, 20, what="a job writing the new bundles' assignments")
    try:
        assert set(late) <= svc.jobs.in_flight
        # Meanwhile: a manual unload, a config update and a dry run all go through.
        moved = sorted(cluster.bundles() - set(late))[0]
        dest = "b2:8080" if cluster.owners()[moved] == "b1:8080" else "b1:8080"
        record = _in_thread(lambda: svc.unload(moved, dest, principal="test"))
        assert record.destination == dest
        # Without a destination the unload takes the lock (placement reads the load data): it too
        # goes through while the job's writes are held.
        other = sorted(cluster.bundles() - set(late))[1]
        placed = _in_thread(lambda: svc.unload(other, principal="test"))
        assert placed.kind == "manual" and placed.bundle == other
        _in_thread(lambda: svc.update_config({"loadBalancerBrokerOverloadedThresholdPercentage": 84}))
        assert svc.config.loadBalancerBrokerOverloadedThresholdPercentage == 84
        _in_thread(svc.dry_run)
        assert _in_thread(svc.view) is not None
    finally:
        release.set()
    wait_for(lambda: set(late) <= set(cluster.owners()), 20, what="the held bundles placed and owned")
    wait_for(lambda: cluster.owners().get(moved) == dest, 20, what="the manual move done")
    assert not (set(late) & svc.jobs.in_flight)


def test_an_operators_unload_to_a_broker_does_not_wait_for_a_cycle_deciding(cluster: Cluster) -> None:
    """ZooKeeper-native: deciding 30,000 moves at 100k bundles holds the service lock for seconds. An
    unload to a named broker needs no load data, so it reads the bundle's own nodes and writes without
    the lock; the lock held here for the whole test stands for that decide."""
    svc = _leader_over_two_brokers(cluster, "s1:7045")
    moved = sorted(cluster.bundles())[0]
    source = cluster.owners()[moved]
    dest = "b2:8080" if source == "b1:8080" else "b1:8080"
    taken, release = threading.Event(), threading.Event()

    def decide() -> None:
        with svc._lock:
            taken.set()
            release.wait(60)

    holder = threading.Thread(target=decide, daemon=True)
    holder.start()
    assert taken.wait(10)
    try:
        record = _in_thread(lambda: svc.unload(moved, dest, principal="test"))
        assert (record.source, record.destination, record.kind) == (source, dest, "manual")
        # Bad input is refused by name, still without the lock.
        for bundle, broker, error in (
            ("first/ns/0x00000000_0x00000001", dest, UnknownBundle),
            ("no/such/0x00000000_0x10000000", dest, UnknownBundle),
            (moved, "nobody:8080", UnknownBroker),
        ):
            got = _raised_in_thread(lambda b=bundle, d=broker: svc.unload(b, d))
            assert isinstance(got, error), (bundle, broker, got)
        bad = _raised_in_thread(lambda: svc.unload("first/../x/0x00000000_0x10000000", dest))
        assert isinstance(bad, InvalidInput) and "'..'" in str(bad), bad
        wait_for(lambda: cluster.owners().get(moved) == dest, 20, what="the manual move done meanwhile")
    finally:
        release.set()
        holder.join(10)
