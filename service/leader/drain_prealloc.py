"""``DrainPreallocations``: the drain's placement preallocations, a mixin of
:class:`service.leader.drain_runner.DrainRunner`.

Each move's bundle is preallocated to its destination (:func:`balancer.drain.drain_moves`, Pulsar's
``selectBrokerForAssignment``) so that the next placements count it there before its destination's
report does; the view's refresh ends it when that report lists the bundle or the destination
leaves. Kept per term (a new term's view starts afresh); the sequencer releases a refused or
given-up move's at once, and one no report ever lists (a bundle whose topics the destination never
loaded) ends after :meth:`DrainPreallocations._prealloc_ttl_ms`, so nothing counts on a broker for
ever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from balancer.config import LoadBalancerConfig
    from service.leader.load_view import LoadView


class DrainPreallocations:
    if TYPE_CHECKING:
        _config: LoadBalancerConfig
        _loadview: LoadView
        drain_served_timeout_ms: int

    _drain_prealloc: dict[str, tuple[str, int]]  # bundle -> (destination, since): this term's moves

    def _prealloc_ttl_ms(self) -> int:
        report_ms = int(self._config.loadBalancerReportUpdateMaxIntervalMinutes * 60_000)
        return max(report_ms, 60_000) + self.drain_served_timeout_ms

    def _release_preallocation(self, bundle: str, destination: str) -> None:
        self._loadview.ctx.release(self._loadview.load, bundle, destination)
        self._drain_prealloc.pop(bundle, None)

    def _track_preallocations(self, bundles: list[str], now: int) -> None:
        """Follow the preallocations of moves carried out (the refused ones are released already)."""
        ctx = self._loadview.ctx
        for bundle in bundles:
            dest = ctx.preallocated_bundle_to_broker.get(bundle)
            if dest is not None:
                self._drain_prealloc[bundle] = (dest, now)

    def _expire_preallocations(self, now: int) -> None:
        ctx, ttl = self._loadview.ctx, self._prealloc_ttl_ms()
        for bundle, (dest, since) in list(self._drain_prealloc.items()):
            if ctx.preallocated_bundle_to_broker.get(bundle) != dest:
                del self._drain_prealloc[bundle]  # ended: reported, its broker left, or placed again
            elif now - since >= ttl:
                self._release_preallocation(bundle, dest)

    def _adopt_in_flight(self, bundle: str, destination: str, now: int) -> None:
        """A bundle in flight from an earlier term (a failover mid-move): preallocated to its
        destination in this term's view too, unless that broker already reports it or is gone."""
        load, ctx = self._loadview.load, self._loadview.ctx
        target = load.broker_data.get(destination)
        data = load.bundle_data.get(bundle)
        if (
            bundle in ctx.preallocated_bundle_to_broker
            or target is None
            or data is None
            or destination in ctx.cordoned
            or bundle in target.local_data.last_stats
        ):
            return
        ctx.preallocate(load, bundle, destination, data)
        self._drain_prealloc[bundle] = (destination, now)
