"""On Extensible brokers a move is served when the service-unit state channel says the bundle is Owned
by its destination: the move tick must read ownership there, not in ZooKeeper's ``/namespace`` nodes
that Extensible never writes (the head-to-head's seed-1 run waited the 30 s served timeout after every
transfer, then logged each bundle "unowned for over 10 minutes" while its destination served it)."""

from __future__ import annotations

from typing import Any

from service.leader.move_tick import PacedMoves
from service.pulsar.admin import PulsarAdmin
from service.pulsar.broker_kind import BrokerKinds, ModularKind
from service.pulsar.extensible import ExtensibleReads, UnitState
from service.zookeeper.metadata.store import Owner

A, B = "10.0.0.1:8080", "10.0.0.2:8080"


class _NoZooKeeper:
    def get_many(self, paths: Any) -> Any:
        raise AssertionError(f"read ZooKeeper's ownership nodes {paths}")


class _View:
    def __init__(self, owners: dict[str, Owner] | None) -> None:
        self.owners_elsewhere = lambda: owners

    def nodes_now(self, *a: Any) -> Any:
        raise AssertionError("read the watch-fed ownership tree")


def _tick(owners: dict[str, Owner] | None) -> PacedMoves:
    m = PacedMoves.__new__(PacedMoves)
    m.view = _View(owners)  # type: ignore[assignment]
    m.store = _NoZooKeeper()  # type: ignore[assignment]
    m.zk_native = False  # type: ignore[misc]
    return m


def test_the_move_tick_reads_extensible_ownership_from_the_channel() -> None:
    reads = ExtensibleReads(PulsarAdmin.__new__(PulsarAdmin), lambda url: None)
    reads._apply_units(
        {
            "public/a/0x00000000_0x80000000": UnitState("Owned", B, A, 3),
            "public/a/0x80000000_0xffffffff": UnitState("Releasing", B, A, 2),  # in transfer: nobody
            "public/b/0x00000000_0xffffffff": UnitState("Splitting", None, A, 1),  # its source still serves
        },
        replace=True,
        caught_up=True,
    )
    owners = reads.owners()
    assert {b: o.broker for b, o in owners.items()} == {
        "public/a/0x00000000_0x80000000": B,
        "public/b/0x00000000_0xffffffff": A,
    }
    tick = _tick(owners)
    got = tick._owners_now(["public/a/0x00000000_0x80000000", "public/a/0x80000000_0xffffffff"])
    assert got == {"public/a/0x00000000_0x80000000": B}


def test_modular_brokers_keep_reading_zookeeper() -> None:
    assert ModularKind().owners() is None
    kinds = BrokerKinds(PulsarAdmin.__new__(PulsarAdmin), lambda url: None)
    assert kinds.owners() is None  # Modular until the settings check says otherwise
    tick = _tick(None)
    try:
        tick._owners_now(["public/a/0x00000000_0xffffffff"])
    except AssertionError as e:
        assert "ownership nodes" in str(e)
    else:
        raise AssertionError("Modular ownership was not read from ZooKeeper")


class _NoNamespaceNodes:
    """ZooKeeper as Extensible brokers leave it: no ``/namespace`` ownership node at all."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def read_owner(self, bundle: str) -> Owner | None:
        self.reads.append(bundle)
        return None


def _runner(owners: dict[str, Owner] | None, store: Any) -> Any:
    from types import SimpleNamespace

    from service.leader.drain_runner import DrainRunner

    r = DrainRunner.__new__(DrainRunner)
    r._loadview = SimpleNamespace(owners_elsewhere=lambda: owners)  # type: ignore[assignment]
    r.store = store  # type: ignore[misc]
    r.jobs = SimpleNamespace(zk_native=False)  # type: ignore[assignment]
    return r


def test_the_drain_follows_its_transfer_in_the_channel_on_extensible_brokers() -> None:
    from service.leader.clock import now_ms
    from service.leader.drain import DrainState, InFlight

    bundle = "public/drain/0x00000000_0x20000000"
    state = DrainState(A, in_flight=InFlight(bundle, B, now_ms()))
    store = _NoNamespaceNodes()
    # The transfer has not shown in the channel yet: the drained broker still owns the bundle, so
    # the drain waits on the cheap path instead of refreshing the whole view.
    assert _runner({bundle: Owner(A, 0, 1)}, store)._on_its_way(state) is True
    # Owned by its destination: the full tick settles it (served).
    assert _runner({bundle: Owner(B, 0, 2)}, store)._on_its_way(state) is False
    # Between the two (Releasing, Assigning) nobody owns it: the full tick decides, as on Modular.
    assert _runner({}, store)._on_its_way(state) is False
    assert store.reads == []  # never ZooKeeper's /namespace, which Extensible brokers do not write


def test_the_drain_reads_modular_ownership_in_zookeeper() -> None:
    from service.leader.clock import now_ms
    from service.leader.drain import DrainState, InFlight

    bundle = "public/drain/0x00000000_0x20000000"
    state = DrainState(A, in_flight=InFlight(bundle, B, now_ms()))
    store = _NoNamespaceNodes()
    assert _runner(None, store)._on_its_way(state) is False  # no node: unowned, the full tick decides
    assert store.reads == [bundle]
