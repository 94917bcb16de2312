"""The broker agent: one per broker. It registers the broker, owns bundles, and reports its load.

* Registration: the ephemeral ``/loadbalance/brokers/<brokerId>`` holding LocalBrokerData, and an
  all-zero ``/loadbalance/broker-time-average/<brokerId>``, as a Pulsar broker writes at start.
* Ownership (ZooKeeper-native mode, ``docs/ownership.md``): driven by watches on only the nodes
  that concern this broker (:mod:`service.broker.ownership`): it releases what is assigned
  elsewhere (or deleted by a split), takes what is assigned to it the moment the previous owner's
  ephemeral ``/namespace/<bundle>`` node is gone, and reads nothing while nothing changes. With a
  Pulsar source the real broker owns bundles itself and the agent only reports.
* Report: every ``loadBalancerReportUpdateMinIntervalMillis`` it samples host usage and per-bundle
  stats from its source, applies Pulsar's LocalBrokerData update rule, and writes the node when
  Pulsar's ``needUpdate`` rule says so, or at once after its bundles changed.
* Connection: nothing is written unless connected; after a lost session (ephemeral nodes gone) it
  registers again and re-acquires whatever is still assigned to it.
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
import time
from collections.abc import Callable, Collection
from typing import Protocol

from balancer.config import LoadBalancerConfig
from balancer.loaddata import need_report_update
from balancer.models import LocalBrokerData, NamespaceBundleStats, SystemResourceUsage, TimeAverageBrokerData
from balancer.report_cadence import host_usage_due
from service.broker.host_usage import HostUsage
from service.broker.ownership import OwnershipFollower
from service.broker.workload import Scenario
from service.errors import ServiceError, StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.metadata.records import owner_doc
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.nodes import SHUTDOWN_CALL_TIMEOUT_S

log = logging.getLogger(__name__)


class StatsSource(Protocol):
    """Where an agent's per-bundle traffic comes from."""

    manages_ownership: bool  # True: the agent owns bundles through ZooKeeper (simulated brokers)

    def bundle_stats(self, owned: Collection[str], now_ms: int) -> dict[str, NamespaceBundleStats]: ...

    def host_usage(self, stats: dict[str, NamespaceBundleStats]) -> SystemResourceUsage | None:
        """Simulated usage derived from the stats, or None to measure the real host."""
        ...


class SimulatedSource:
    """Traffic of the owned bundles from a shared :class:`Scenario` (re-read through ``scenario()``)."""

    manages_ownership = True

    def __init__(self, scenario: Callable[[], Scenario | None]) -> None:
        self._scenario = scenario
        self._last = Scenario()

    def _current(self) -> Scenario:
        try:
            got = self._scenario()
        except Exception as e:  # ZooKeeper away or a workload it cannot use: keep serving the last one
            log.debug("keeping the last workload: %s", e)
            got = None
        if got is not None:
            self._last = got
        return self._last

    def bundle_stats(self, owned: Collection[str], now_ms: int) -> dict[str, NamespaceBundleStats]:
        return self._current().bundle_stats(owned, now_ms)

    def host_usage(self, stats: dict[str, NamespaceBundleStats]) -> SystemResourceUsage | None:
        return self._last.host_usage(stats)


def agent_version() -> str:
    """A semantic version for ``brokerVersionString``: Pulsar's BrokerVersionFilter parses it as semver
    and, with ``preferLaterVersions``, gives up on the whole filter when one broker's does not parse."""
    try:
        return importlib.metadata.version("loadmgr")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0"


class BrokerAgent:
    """Runs the broker's ownership and report loops on one background thread."""

    def __init__(
        self,
        store: ZkStore,
        broker_id: str,
        config: LoadBalancerConfig,
        source: StatsSource,
        host: HostUsage | None = None,
        web_url: str | None = None,
        native_url: str | None = None,
        ownership_poll_s: float = 1.0,
        report_interval_s: float | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.config = config
        self.source = source
        self.host = host or HostUsage(nic_speed_override_gbps=config.loadBalancerOverrideBrokerNicSpeedGbps)
        self.web_url = web_url or f"http://{broker_id}"
        # Pulsar's brokerServicePort defaults to 6650; a broker that listens elsewhere says so.
        native = native_url or f"pulsar://{broker_id.rsplit(':', 1)[0]}:6650"
        self.urls = {"nativeUrl": native, "httpUrl": self.web_url}
        self.ownership_poll_s = ownership_poll_s
        self.report_interval_s = report_interval_s or config.loadBalancerReportUpdateMinIntervalMillis / 1000
        self._clock_ms = clock_ms
        self.local = LocalBrokerData(
            web_service_url=self.web_url,
            pulsar_service_url=self.urls["nativeUrl"],
            load_manager_class_name=config.loadManagerClassName,
            broker_version_string=agent_version(),
            start_timestamp=clock_ms(),
        )
        self._last_written: LocalBrokerData | None = None
        self._owned: frozenset[str] = frozenset()  # replaced, never mutated: read from other threads
        self._disconnected_at: float | None = None
        self._registered_session: int | None = None
        self._ever_registered = False
        self._dirty = True
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.reports_written = 0
        self._host_sample: SystemResourceUsage | None = None
        self._host_sampled_ms = 0
        self.follower = OwnershipFollower(store, broker_id, owner_doc(broker_id, self.urls), self._wake.set)

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self.store.add_state_listener(self._on_state)
        self._thread = threading.Thread(target=self._run, name=f"agent-{self.broker_id}", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            # The loop may be blocked in a call to a dead ZooKeeper; it is a daemon and store.stop()
            # fails that call, so waiting longer than one bounded call would only delay the exit.
            self._thread.join(timeout=SHUTDOWN_CALL_TIMEOUT_S)
        if release:
            # One deadline for all the releases: a broker owning hundreds of bundles must not
            # multiply the timeout, and what is not released goes with the session.
            deadline = time.monotonic() + SHUTDOWN_CALL_TIMEOUT_S
            for bundle in sorted(self._owned):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    self.store.release_if_mine(P.ownership_path(bundle), remaining)
                except ServiceError as e:
                    log.info("agent %s: other ownership nodes go with the session: %s", self.broker_id, e)
                    break
            self._owned = frozenset()

    def owned(self) -> set[str]:
        """What this broker serves now. The follower's set changes the moment it stops serving a
        bundle (before the release) or takes one (a watch callback may do it between two steps);
        ``_owned`` follows it only when a step ends, so a moved bundle would show on both brokers."""
        if self.source.manages_ownership:
            return set(self.follower.owned)
        return set(self._owned)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's thread: flag and wake only.
        if state == "LOST":
            self._registered_session = None
            self._owned = frozenset()  # the ownership nodes died with the session: stop serving now
            self.follower.stop_serving()
        if state == "CONNECTED":
            if self._disconnected_at is not None:
                self.follower.resync()  # watches may not have survived the gap (kazoo#151)
            self._disconnected_at = None
        elif self._disconnected_at is None:
            self._disconnected_at = time.monotonic()
        self._wake.set()

    def _stop_serving_if_cut_off(self) -> None:
        """Stop serving once disconnected long enough that the session may have expired on the server.

        The server expires a session a session timeout after it last heard from the client; kazoo
        notices a dead connection up to two thirds of that timeout late, so after one more third the
        ensemble may already have handed this broker's bundles to another: stop serving before that.
        Reconnected on the same session, the next poll serves again whatever nodes are still ours.
        """
        since = self._disconnected_at
        if since is not None and self._owned and time.monotonic() - since >= self.store.session_timeout_s / 3:
            log.warning(
                "agent %s cut off from ZooKeeper; not serving %d bundle(s)", self.broker_id, len(self._owned)
            )
            self._owned = frozenset()
            self.follower.stop_serving()
            self._dirty = True

    # ---- loop -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        next_report = 0.0
        while not self._stop.is_set():
            try:
                self._stop_serving_if_cut_off()
                if self.store.connected:
                    self._ensure_registered()
                    if self.source.manages_ownership:
                        self._reconcile_ownership()
                    now = time.monotonic()
                    # Ownership events already queued (a cycle's moves arriving): follow them first;
                    # the report waits for a quiet moment, or for its regular time.
                    following = self._wake.is_set() and now < next_report
                    if (now >= next_report or self._dirty) and not following:
                        self._report()
                        next_report = now + self.report_interval_s
            except ServiceError as e:
                log.info("agent %s: %s", self.broker_id, e)
            except Exception:
                log.exception("agent %s loop failed", self.broker_id)
            self._wake.wait(timeout=min(self.ownership_poll_s, self.report_interval_s))
            self._wake.clear()

    def _ensure_registered(self) -> None:
        session = self.store.session_id
        if session is not None and session == self._registered_session:
            return
        if self._ever_registered and self.source.manages_ownership:
            # A new session: the old one's ephemeral ownership nodes died with it, and other brokers
            # may own those bundles by now. Register with what this session owns (nothing yet), never
            # the old list, or the leader would count another broker's bundles here.
            self._owned = frozenset()
            self.local.update(self.local.usages(), {})
        self.store.register_broker(self.broker_id, self.local)
        self._ever_registered = True
        self.store.write_time_average(self.broker_id, TimeAverageBrokerData())
        self._registered_session = session
        self._dirty = True
        log.info("agent %s registered (session 0x%x)", self.broker_id, session or 0)

    def _reconcile_ownership(self) -> None:
        """One step of the watch-driven follower: reads only what changed (nothing when idle)."""
        try:
            changed = self.follower.step()
        finally:
            # Whatever the step got to: it drops a bundle from what it serves before releasing it.
            if self._owned != self.follower.owned:
                self._owned = self.follower.owned
                self._dirty = True
        self._dirty = self._dirty or changed

    def _host_usage(self, now_ms: int) -> SystemResourceUsage:
        """The host's usage, measured once per ``loadBalancerHostUsageCheckIntervalMinutes``.

        Pulsar measures on its own schedule (``calculateBrokerHostUsage``) and every report reuses
        the last measurement, so CPU and NIC rates are averages over that interval, not over the
        few seconds since the previous report."""
        last = self._host_sampled_ms if self._host_sample is not None else None
        if self._host_sample is None or host_usage_due(last, now_ms, self.config):
            self._host_sample = self.host.sample()
            self._host_sampled_ms = now_ms
        return self._host_sample.model_copy(deep=True)

    def _report(self) -> None:
        now = self._clock_ms()
        owned = self._owned if self.source.manages_ownership else None
        stats = self.source.bundle_stats(owned if owned is not None else (), now)
        system = self.source.host_usage(stats) or self._host_usage(now)
        self.local.update(system, stats)
        last = self._last_written
        if (
            not self._dirty
            and last is not None
            and need_report_update(last, self.local, self.config, now) is None
        ):
            return
        try:
            self.local.last_update = now
            self.store.write_broker(self.broker_id, self.local)
        except StaleWrite:
            self._registered_session = None  # our node vanished: register again next round
            return
        self.local.mark_written(now)
        self._last_written = self.local.model_copy(deep=True)
        self._dirty = False
        self.reports_written += 1
