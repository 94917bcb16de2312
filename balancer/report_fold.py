"""Bundle time averages sampled per broker report: Pulsar's ``updateBundleData``, one report at a time.

Pulsar's leader takes its samples when a broker's report changes (``ModularLoadManagerImpl``'s
``handleDataNotification`` on ``/loadbalance/brokers`` runs ``updateAll``), not on its shedding
schedule. :func:`fold_reports` is that update for the reports that changed: each bundle a changed
report lists takes one sample of the stats in it (seeded first, if unknown, from stored data, a
quota or the defaults), preallocations the broker now reports end, and the time-averaged totals of
the brokers concerned are recomputed. Bundles no report lists any more are dropped. Work is in
proportion to the changed reports: with none, nothing per bundle is touched.

One difference from Pulsar, on purpose: Pulsar's ``updateBundleData`` walks every broker on every
notification, so a bundle takes a sample (of unchanged stats) whenever *any* broker reports, and
its windows' length in time depends on the cluster's size. Here each report version is folded
exactly once, so a bundle's window counts its own broker's reports.

:class:`ReportIndex` remembers, per broker, the bundles of the report last folded and, per bundle,
how many folded reports list it: what tells a vanished bundle (and a bundle two brokers list while
it moves) without scanning all bundles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from balancer.loaddata import add_sample, initial_bundle_data
from balancer.models import BundleData, LoadData, ResourceQuota


@dataclass
class ReportIndex:
    """The folded reports' bundle lists: ``bundles_of`` broker -> bundles, ``listed`` bundle -> count."""

    bundles_of: dict[str, set[str]] = field(default_factory=dict)
    listed: dict[str, int] = field(default_factory=dict)

    def copy(self) -> ReportIndex:
        return ReportIndex({b: set(s) for b, s in self.bundles_of.items()}, dict(self.listed))

    def _unlist(self, bundle: str, orphaned: list[str]) -> None:
        n = self.listed.get(bundle, 0) - 1
        if n > 0:
            self.listed[bundle] = n
        else:
            self.listed.pop(bundle, None)
            orphaned.append(bundle)


@dataclass
class FoldResult:
    """What one :func:`fold_reports` did."""

    samples: int = 0  # bundle samples taken
    seeded: list[str] = field(default_factory=list)  # bundles new to ``load.bundle_data``
    dropped: list[str] = field(default_factory=list)  # bundles no folded report lists any more
    recomputed: set[str] = field(default_factory=set)  # brokers whose time-averaged totals were redone


def fold_reports(
    load: LoadData,
    index: ReportIndex,
    changed: Iterable[str],
    gone: Iterable[str],
    stored_bundle_data: Mapping[str, BundleData],
    quotas: Mapping[str, ResourceQuota],
    recheck: bool = False,
) -> FoldResult:
    """Fold the current reports of ``changed`` brokers (in ``load.broker_data``) into ``load`` and
    ``index`` (both mutated); ``gone`` brokers' reports stop listing their bundles. ``recheck``:
    bundles were removed from ``load.bundle_data`` since the last fold (see :func:`_reconcile_held`)."""
    out = FoldResult()
    bundle_data = load.bundle_data
    orphaned: list[str] = []
    for broker in gone:
        for bundle in index.bundles_of.pop(broker, ()):
            index._unlist(bundle, orphaned)
    shared: set[str] = set()  # sampled bundles another broker's report lists too
    for broker in sorted(set(changed)):
        data = load.broker_data.get(broker)
        if data is None:
            continue
        stats = data.local_data.last_stats
        old = index.bundles_of.get(broker, set())
        new = set(stats)
        for bundle in old - new:
            index._unlist(bundle, orphaned)
        for bundle in new - old:
            index.listed[bundle] = index.listed.get(bundle, 0) + 1
        index.bundles_of[broker] = new
        for bundle, s in stats.items():
            bd = bundle_data.get(bundle)
            if bd is None:
                bd, _ = initial_bundle_data(bundle, stored_bundle_data, quotas)
                bundle_data[bundle] = bd
                out.seeded.append(bundle)
            add_sample(bd, s)
            out.samples += 1
            if index.listed[bundle] > 1:
                shared.add(bundle)
        out.recomputed.add(broker)
    # Preallocations are few; any broker's may have become plain ownership (Pulsar checks them all).
    for data in load.broker_data.values():
        pre = data.preallocated_bundle_data
        if pre:
            for bundle in [b for b in pre if b in data.local_data.last_stats]:
                del pre[bundle]
    out.dropped = [b for b in orphaned if b not in index.listed and bundle_data.pop(b, None) is not None]
    _reconcile_held(load, index, out, stored_bundle_data, quotas, recheck)
    if shared:
        out.recomputed.update(b for b, names in index.bundles_of.items() if not shared.isdisjoint(names))
    for broker in out.recomputed:
        data = load.broker_data.get(broker)
        if data is not None:
            data.time_average_data.reset(data.local_data.last_stats.keys(), bundle_data)
    return out


def _reconcile_held(
    load: LoadData,
    index: ReportIndex,
    out: FoldResult,
    stored_bundle_data: Mapping[str, BundleData],
    quotas: Mapping[str, ResourceQuota],
    recheck: bool,
) -> None:
    """Make the held bundles exactly the listed ones. Every listed bundle is held after a fold, so
    unless one was removed since (a split parent: ``recheck``), equal sizes mean equal sets and no
    scan is needed; bundles held outside a fold (placement seeds unowned bundles, which go unless
    reported) make the sizes differ."""
    bundle_data = load.bundle_data
    if not recheck and len(bundle_data) == len(index.listed):
        return
    unlisted = [b for b in bundle_data if b not in index.listed]
    for b in unlisted:
        del bundle_data[b]
    out.dropped += unlisted
    if not recheck and len(bundle_data) == len(index.listed):
        return
    # Listed but not held: forgotten since its report was folded. Pulsar's next update would seed it
    # and sample the report again; so do we, with the first lister's stats.
    for broker in sorted(index.bundles_of):
        data = load.broker_data.get(broker)
        if data is None:
            continue
        for bundle, s in data.local_data.last_stats.items():
            if bundle not in bundle_data:
                bd, _ = initial_bundle_data(bundle, stored_bundle_data, quotas)
                add_sample(bd, s)
                bundle_data[bundle] = bd
                out.seeded.append(bundle)
                out.samples += 1
                out.recomputed.add(broker)


def refresh_time_averages(
    load: LoadData, bundles: Iterable[str], skip: set[str] | frozenset[str] = frozenset()
) -> set[str]:
    """Recompute the time-averaged totals of every broker (but ``skip``) whose report lists one of
    ``bundles`` (whose data changed outside a fold: long-term data adopted from the store)."""
    changed = set(bundles)
    done: set[str] = set()
    if not changed:
        return done
    for broker, data in load.broker_data.items():
        stats = data.local_data.last_stats
        if broker not in skip and not changed.isdisjoint(stats.keys()):
            data.time_average_data.reset(stats.keys(), load.bundle_data)
            done.add(broker)
    return done
