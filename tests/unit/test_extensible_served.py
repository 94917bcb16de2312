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
