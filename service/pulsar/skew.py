"""A skewed namespace on a real Pulsar cluster: a namespace whose bundles all sit on one broker.

What `loadmgr pulsar-cluster --skewed-load` sets up for an operator to watch loadmgr balance, and what
the ``tests/pulsar`` tier starts its balancing tests from, on both broker kinds (the tests wait for it
with their own clock and their tolerance of a lookup answered mid-move).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from service.pulsar.admin import PulsarAdmin
from service.pulsar.workload import topics_for_bundles

TOPICS_PER_BUNDLE = 2


@dataclass
class SkewedNamespace:
    admin: PulsarAdmin
    ns: str
    target: str
    ranges: list[str]
    topics: dict[str, str]  # topic -> bundle range
    owner: Callable[[str], str | None] | None = None

    def where(self, rng: str) -> str | None:
        """The bundle's broker: ``owner`` if given, else a lookup of one of its topics (which assigns
        the bundle if nobody owns it)."""
        if self.owner is not None:
            return self.owner(rng)
        return self.admin.lookup(next(t for t, r in self.topics.items() if r == rng))

    def elsewhere(self) -> list[str]:
        """The ranges whose bundle is not on the target broker."""
        return [r for r in self.ranges if self.where(r) != self.target]

    def resend(self) -> list[str]:
        """Unload the bundles still elsewhere to the target again; returns them. On Modular brokers a
        lookup that reaches a bundle between its unload and the destination's claim lets Pulsar place
        it itself, and nothing moves it back (seen at load 9: 143 s and still off target)."""
        off = self.elsewhere()
        for rng in off:
            self.admin.unload(f"{self.ns}/{rng}", self.target)
        return off


def skew_namespace(
    admin: PulsarAdmin,
    ns: str,
    bundles: int,
    target: str,
    owner: Callable[[str], str | None] | None = None,
) -> SkewedNamespace:
    """Create ``ns`` with ``bundles`` bundles and two topics hashing into each, and unload each bundle
    not on ``target`` to it (Extensible brokers refuse a transfer to a bundle's own owner). Moves are
    under way when it returns: wait on :meth:`SkewedNamespace.elsewhere` or ``resend``."""
    admin.request("PUT", f"/admin/v2/namespaces/{ns}", body={"bundles": {"numBundles": bundles}})
    ranges = admin.bundles(ns)
    topics = topics_for_bundles(ns, ranges, TOPICS_PER_BUNDLE)
    for topic in topics:
        admin.lookup(topic)
    skewed = SkewedNamespace(admin, ns, target, ranges, topics, owner)
    skewed.resend()
    return skewed
