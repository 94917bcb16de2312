"""An operator's unload whose destination is the bundle's current owner is refused: 409 naming the
bundle, the broker and why (Pulsar's Extensible load manager refuses a transfer to the current owner
too), nothing written, nothing recorded, and the CLI exits 2 with that message.

Real ZooKeeper and agents; both the ZooKeeper-native path (a named destination is written without the
service lock) and the Pulsar-mode path (an executor that answers like Pulsar's admin API)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from balancer.errors import Conflict
from service.api import create_app
from service.broker.workload import Scenario
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from tests.integration.conftest import Cluster, assign, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "public/owner"
B1, B2 = "b1:8080", "b2:8080"


class _RemoteAdmin:
    """An executor like Pulsar's admin API (remote splits, unloads sent far away): records what it
    is asked to do, moves nothing."""

    name = "remote"
    remote_split = True

    def __init__(self) -> None:
        self.unloads: list[tuple[str, str | None, str | None]] = []

    def prepare(self, bundle: str, destination: str | None) -> None:
        pass

    def unload(self, bundle: str, source: str | None, destination: str | None, reason: str = "") -> None:
        self.unloads.append((bundle, source, destination))

    def split(self, bundle: str, algorithm: str | None, positions: Any, unload: bool = False) -> list[str]:
        return []


def _leader(cluster: Cluster, instance: str, **kw: Any) -> tuple[LoadManagerService, str, str]:
    """A leader over two agents with every bundle owned; long intervals, so no job of its own moves
    anything during the test. Returns it, a bundle and that bundle's owner."""
    config = fast_config(
        loadBalancerSheddingIntervalMinutes=10.0, loadBalancerResourceQuotaUpdateIntervalMinutes=10.0
    )
    cluster.scenario(Scenario(namespaces={NS: 4}))
    cluster.agent(B1, config)
    cluster.agent(B2, config)
    # Owned before the leader starts: a Pulsar-mode executor here moves nothing, so the leader's own
    # placement of unowned bundles would never be served.
    for i, b in enumerate(sorted(cluster.bundles())):
        assign(cluster.admin, b, (B1, B2)[i % 2])
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    svc = cluster.service(instance, config, settings_kw={"history_enabled": False}, **kw)
    wait_for(svc.is_leader, 20, what="leadership")
    bundle = sorted(cluster.bundles())[0]
    return svc, bundle, cluster.owners()[bundle]


def _refusal_names_it(text: str, bundle: str, owner: str) -> None:
    assert bundle in text and owner in text and "already owned" in text, text


def test_zookeeper_native_unload_to_the_owner_is_refused_over_rest_and_cli(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from service.commands import client as cli_client
    from service.commands.cli import main

    svc, bundle, owner = _leader(cluster, "s1:7061")
    other = B2 if owner == B1 else B1
    node = P.assignment_path(bundle)
    _, before = cluster.admin.client.get(node)
    manual_before = svc.decisions(kind="manual")

    with pytest.raises(Conflict) as refused:
        svc.unload(bundle, owner, principal="test")
    _refusal_names_it(str(refused.value), bundle, owner)

    app = create_app(svc, Settings())
    client = TestClient(app, base_url="http://127.0.0.1")
    r = client.post(f"/bundles/{bundle}/unload", params={"destinationBroker": owner})
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "Conflict"
    _refusal_names_it(r.text, bundle, owner)
    r = client.post(f"/bundles/{bundle}/unload", json={"destinationBroker": owner})
    assert r.status_code == 409, r.text

    monkeypatch.setattr(cli_client, "_client", lambda _a: TestClient(app, base_url="http://127.0.0.1"))
    ns, _, rng = bundle.rpartition("/")
    for argv in (["unload", bundle, "-d", owner], ["namespaces", "unload", ns, "--bundle", rng, "-d", owner]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "HTTP 409" in err, err
        _refusal_names_it(err, bundle, owner)

    # Nothing written, nothing recorded, nothing followed in the move queue.
    _, after = cluster.admin.client.get(node)
    assert after.mzxid == before.mzxid
    assert cluster.owners()[bundle] == owner
    assert svc.decisions(kind="manual") == manual_before
    assert bundle not in svc.jobs.in_flight

    # control: the same unload to the other broker goes through, so the checks above could fail
    assert main(["unload", bundle, "-d", other]) == 0
    wait_for(lambda: cluster.owners().get(bundle) == other, 20, what="the bundle moved to the other broker")
    assert any(d.bundle == bundle and d.destination == other for d in svc.decisions(kind="manual"))


def test_pulsar_mode_unload_to_the_owner_is_refused_and_never_sent(cluster: Cluster) -> None:
    remote = _RemoteAdmin()
    svc, bundle, owner = _leader(cluster, "s1:7062", executor=remote)
    other = B2 if owner == B1 else B1
    manual_before = svc.decisions(kind="manual")

    with pytest.raises(Conflict) as refused:
        svc.unload(bundle, owner, principal="test")
    _refusal_names_it(str(refused.value), bundle, owner)
    r = TestClient(create_app(svc, Settings()), base_url="http://127.0.0.1").post(
        f"/bundles/{bundle}/unload", json={"destinationBroker": owner}
    )
    assert r.status_code == 409, r.text
    _refusal_names_it(r.text, bundle, owner)
    assert [u for u in remote.unloads if u[0] == bundle] == []
    assert svc.decisions(kind="manual") == manual_before

    # control: to the other broker it is sent
    svc.unload(bundle, other, principal="test")
    assert (bundle, owner, other) in remote.unloads
