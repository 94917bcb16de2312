"""Time-averaged traffic: a bundle's short- and long-term windows (``BundleData``), a broker's sums of
them (``TimeAverageBrokerData``) and resource quotas, as Pulsar writes them under
``/loadbalance/bundle-data``, ``/loadbalance/broker-time-average`` and ``/loadbalance/resource-quota``.
:mod:`balancer.models` re-exports all of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import Field

from balancer.models_base import (
    DEFAULT_MSG_RATE,
    DEFAULT_MSG_THROUGHPUT,
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    NamespaceBundleStats,
    PulsarModel,
)


class TimeAverageMessageData(PulsarModel):
    """A windowed average of a bundle's traffic: exact mean up to ``maxSamples``, then an EMA."""

    max_samples: int = SHORT_TERM_SAMPLES
    num_samples: int = 0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0

    @classmethod
    def with_defaults(cls, max_samples: int) -> TimeAverageMessageData:
        """Pulsar's seed for a bundle never seen before; the first real sample replaces it."""
        return cls(
            max_samples=max_samples,
            num_samples=0,
            msg_throughput_in=DEFAULT_MSG_THROUGHPUT,
            msg_throughput_out=DEFAULT_MSG_THROUGHPUT,
            msg_rate_in=DEFAULT_MSG_RATE,
            msg_rate_out=DEFAULT_MSG_RATE,
        )

    def update_values(self, rate_in: float, rate_out: float, tp_in: float, tp_out: float) -> None:
        self.num_samples = min(self.num_samples + 1, self.max_samples)
        n = self.num_samples
        self.msg_throughput_in = ((n - 1) * self.msg_throughput_in + tp_in) / n
        self.msg_throughput_out = ((n - 1) * self.msg_throughput_out + tp_out) / n
        self.msg_rate_in = ((n - 1) * self.msg_rate_in + rate_in) / n
        self.msg_rate_out = ((n - 1) * self.msg_rate_out + rate_out) / n

    def update(self, stats: NamespaceBundleStats) -> None:
        self.update_values(
            stats.msg_rate_in, stats.msg_rate_out, stats.msg_throughput_in, stats.msg_throughput_out
        )

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out

    def order_key(self) -> tuple[int, int, int]:
        """Pulsar's comparison: throughput in, then out, then msg rate, each at a coarse resolution."""
        return (
            int(self.msg_throughput_in / 100_000),
            int(self.msg_throughput_out / 100_000),
            int(self.msg_rate / 100),
        )


class ResourceQuota(PulsarModel):
    """A bundle's quota at ``/loadbalance/resource-quota/<bundle>``; seeds data of unknown bundles."""

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    bandwidth_in: float = 0.0
    bandwidth_out: float = 0.0
    memory: float = 0.0
    dynamic: bool = True


class BundleData(PulsarModel):
    """Short- and long-term traffic of a bundle at ``/loadbalance/bundle-data/<bundle>``."""

    short_term_data: TimeAverageMessageData = Field(
        default_factory=lambda: TimeAverageMessageData.with_defaults(SHORT_TERM_SAMPLES)
    )
    long_term_data: TimeAverageMessageData = Field(
        default_factory=lambda: TimeAverageMessageData.with_defaults(LONG_TERM_SAMPLES)
    )
    topics: int = 0

    @classmethod
    def default(cls) -> BundleData:
        return cls()

    @classmethod
    def from_quota(cls, quota: ResourceQuota) -> BundleData:
        """Seed both windows from a quota, with full sample counts ("assume ample history")."""

        def window(n: int) -> TimeAverageMessageData:
            return TimeAverageMessageData(
                max_samples=n,
                num_samples=n,
                msg_rate_in=quota.msg_rate_in,
                msg_rate_out=quota.msg_rate_out,
                msg_throughput_in=quota.bandwidth_in,
                msg_throughput_out=quota.bandwidth_out,
            )

        return cls(short_term_data=window(SHORT_TERM_SAMPLES), long_term_data=window(LONG_TERM_SAMPLES))

    def update(self, stats: NamespaceBundleStats) -> None:
        self.short_term_data.update(stats)
        self.long_term_data.update(stats)
        self.topics = stats.topics

    def order_key(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        return (self.short_term_data.order_key(), self.long_term_data.order_key())


class TimeAverageBrokerData(PulsarModel):
    """Sums of a broker's bundles' averages, at ``/loadbalance/broker-time-average/<brokerId>``."""

    short_term_msg_throughput_in: float = 0.0
    short_term_msg_throughput_out: float = 0.0
    short_term_msg_rate_in: float = 0.0
    short_term_msg_rate_out: float = 0.0
    long_term_msg_throughput_in: float = 0.0
    long_term_msg_throughput_out: float = 0.0
    long_term_msg_rate_in: float = 0.0
    long_term_msg_rate_out: float = 0.0

    def reset(self, bundles: Iterable[str], bundle_data: Mapping[str, BundleData]) -> None:
        """Recompute from scratch; a bundle without data contributes Pulsar's default stats."""
        s_tp_in = s_tp_out = s_r_in = s_r_out = 0.0
        l_tp_in = l_tp_out = l_r_in = l_r_out = 0.0
        for b in bundles:
            d = bundle_data.get(b)
            if d is None:
                s_tp_in += DEFAULT_MSG_THROUGHPUT
                s_tp_out += DEFAULT_MSG_THROUGHPUT
                s_r_in += DEFAULT_MSG_RATE
                s_r_out += DEFAULT_MSG_RATE
                l_tp_in += DEFAULT_MSG_THROUGHPUT
                l_tp_out += DEFAULT_MSG_THROUGHPUT
                l_r_in += DEFAULT_MSG_RATE
                l_r_out += DEFAULT_MSG_RATE
                continue
            st, lt = d.short_term_data, d.long_term_data
            s_tp_in += st.msg_throughput_in
            s_tp_out += st.msg_throughput_out
            s_r_in += st.msg_rate_in
            s_r_out += st.msg_rate_out
            l_tp_in += lt.msg_throughput_in
            l_tp_out += lt.msg_throughput_out
            l_r_in += lt.msg_rate_in
            l_r_out += lt.msg_rate_out
        self.short_term_msg_throughput_in = s_tp_in
        self.short_term_msg_throughput_out = s_tp_out
        self.short_term_msg_rate_in = s_r_in
        self.short_term_msg_rate_out = s_r_out
        self.long_term_msg_throughput_in = l_tp_in
        self.long_term_msg_throughput_out = l_tp_out
        self.long_term_msg_rate_in = l_r_in
        self.long_term_msg_rate_out = l_r_out
