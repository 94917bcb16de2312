"""The skewed namespace's set-up: only bundles elsewhere are unloaded to the target, and again."""

from __future__ import annotations

from typing import Any

from service.pulsar.skew import skew_namespace


class FakeAdmin:
    """Records requests; bundles' owners are a dict the test moves by hand (no Pulsar logic)."""

    def __init__(self, owners: dict[str, str]) -> None:
        self.owners = owners
        self.unloads: list[tuple[str, str | None]] = []
        self.created: list[tuple[str, Any]] = []

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> None:
        self.created.append((path, body))

    def bundles(self, ns: str) -> list[str]:
        return sorted(self.owners)

    def lookup(self, topic: str) -> str:
        from balancer.bundles import BundleRange, topic_hash

        h = topic_hash(topic)
        return next(o for r, o in self.owners.items() if BundleRange.parse(r).includes(h))

    def unload(self, bundle: str, destination: str | None = None) -> None:
        self.unloads.append((bundle, destination))


OWNERS = {
    "0x00000000_0x40000000": "a:8080",
    "0x40000000_0x80000000": "b:8080",
    "0x80000000_0xc0000000": "a:8080",
    "0xc0000000_0xffffffff": "c:8080",
}


def test_only_bundles_not_on_the_target_are_unloaded_to_it() -> None:
    admin = FakeAdmin(dict(OWNERS))
    skewed = skew_namespace(admin, "public/skewed", 4, "a:8080")  # type: ignore[arg-type]
    assert admin.created == [("/admin/v2/namespaces/public/skewed", {"bundles": {"numBundles": 4}})]
    assert admin.unloads == [
        ("public/skewed/0x40000000_0x80000000", "a:8080"),
        ("public/skewed/0xc0000000_0xffffffff", "a:8080"),
    ]
    assert len(skewed.topics) == 8 and set(skewed.topics.values()) == set(OWNERS)


def test_resend_unloads_what_is_still_elsewhere_and_an_owner_reader_replaces_lookups() -> None:
    admin = FakeAdmin(dict(OWNERS))
    owners = dict(OWNERS)
    skewed = skew_namespace(admin, "public/skewed", 4, "a:8080", owner=owners.get)  # type: ignore[arg-type]
    owners["0x40000000_0x80000000"] = "a:8080"  # one arrived, the other did not
    admin.unloads.clear()
    assert skewed.resend() == ["0xc0000000_0xffffffff"]
    assert admin.unloads == [("public/skewed/0xc0000000_0xffffffff", "a:8080")]
    owners["0xc0000000_0xffffffff"] = "a:8080"
    assert skewed.elsewhere() == []
