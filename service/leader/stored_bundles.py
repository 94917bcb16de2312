"""Stored bundle data as the watch cache holds it: thirteen numbers a bundle, not three models.

The leader keeps every bundle's ``/loadbalance/bundle-data`` node in its watch cache, but reads a
stored value only when it first meets a bundle (seeding), adopts another writer's long-term window,
or places an orphan. As pydantic models (a ``BundleData`` and its two windows, each with its own
dict and field set) they cost ~2.4 KB a bundle, 240 MB at 100,000 bundles beside the leader's own
copies; packed into one tuple, ~0.2 KB. Each node is still decoded and checked in full when read
(``ZkStore.decode_bundle_data``): a node that does not validate is held as no value, as before.
:class:`StoredBundles` gives them back as fresh ``BundleData`` objects, one per lookup.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from balancer.models import BundleData
from balancer.time_averages import TimeAverageMessageData

# (max_samples, num_samples, throughput in, throughput out, rate in, rate out) per window, + topics
Packed = tuple[Any, ...]


def _window(w: TimeAverageMessageData) -> tuple[Any, ...]:
    return (
        w.max_samples,
        w.num_samples,
        w.msg_throughput_in,
        w.msg_throughput_out,
        w.msg_rate_in,
        w.msg_rate_out,
    )


def pack(data: BundleData) -> Packed:
    return (*_window(data.short_term_data), *_window(data.long_term_data), data.topics)


def _unwindow(p: Packed, i: int) -> TimeAverageMessageData:
    return TimeAverageMessageData.model_construct(
        max_samples=p[i],
        num_samples=p[i + 1],
        msg_throughput_in=p[i + 2],
        msg_throughput_out=p[i + 3],
        msg_rate_in=p[i + 4],
        msg_rate_out=p[i + 5],
    )


def unpack(p: Packed) -> BundleData:
    """The ``BundleData`` packed (values validated when the node was read)."""
    return BundleData.model_construct(
        short_term_data=_unwindow(p, 0), long_term_data=_unwindow(p, 6), topics=p[12]
    )


class StoredBundles(Mapping[str, BundleData]):
    """Bundle -> stored ``BundleData``, built on each lookup from the packed values."""

    def __init__(self, packed: Mapping[str, Packed]) -> None:
        self._packed = packed

    def __getitem__(self, bundle: str) -> BundleData:
        return unpack(self._packed[bundle])

    def __contains__(self, bundle: object) -> bool:
        return bundle in self._packed

    def __iter__(self) -> Iterator[str]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)
