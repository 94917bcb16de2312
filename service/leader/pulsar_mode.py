"""``PulsarMode``: what ``loadmgr serve`` does differently beside a real Pulsar cluster (``mode=pulsar``).

A mixin of :class:`service.leader.service.LoadManagerService`. In Pulsar mode the brokers own bundles
themselves (``/namespace/...``), write their own ``LocalBrokerData`` and bundle data, and place
bundles on lookup through their own leader broker; loadmgr reads all of that, decides shedding and
splits, and acts through the admin API (:class:`service.pulsar.admin.PulsarAdminExecutor`).

Before acting it must know the brokers' own load manager will not fight it: a thread re-reads every
broker's effective settings (:mod:`service.pulsar.broker_settings`) at start, every
``pulsar_check_interval_s``, whenever a broker joins or leaves, and whenever ``/admin/configuration``
changes. While any broker sheds or auto-splits by itself, loadmgr acts on nothing — scheduled or
manual — and says so: one log line per change, a ``/readyz`` reason, ``loadmgr_pulsar_acting`` 0.
With ``pulsar_beside_brokers`` it stays ready and keeps deciding in dry-run (``GET /dry-run``,
decisions and metrics) without unloading or splitting.

The same check learns which load manager the brokers run (Modular or Extensible); what differs
between the two — where their load and ownership are read — is :mod:`service.pulsar.broker_kind`'s,
handed to the load view as its overlay. Until the kind's reads are complete, loadmgr does not act.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from balancer.bundles import NamespaceBundles, topic_namespace
from balancer.errors import PreconditionFailed, UnknownBundle
from service.errors import AdminRequired, ExecutorError, ServiceError
from service.pulsar.admin import PulsarAdmin, PulsarAdminExecutor, PulsarTls
from service.pulsar.broker_kind import BrokerKinds
from service.pulsar.broker_settings import Verdict, check
from service.pulsar.extensible import read_metadata_channel
from service.pulsar.warm_up import Warmer
from service.zookeeper import paths as P

if TYPE_CHECKING:
    from service.leader.load_view import LoadView
    from service.leader.metrics_sink import MetricsSink
    from service.settings import Settings
    from service.zookeeper.metadata.store import ZkStore

log = logging.getLogger("service.leader.service")

NOT_CHECKED = "the Pulsar brokers' load-manager settings have not been read yet"


def pulsar_admin(settings: Settings) -> PulsarAdmin:
    """The admin client ``settings`` describe (ConfigError naming the field when they do not)."""
    from balancer.errors import ConfigError

    if not settings.pulsar_admin_url:
        raise ConfigError(
            "pulsar_admin_url",
            "",
            "Pulsar mode needs the brokers' web service URL (LOADMGR_PULSAR_ADMIN_URL)",
        )
    tls = PulsarTls(
        settings.pulsar_tls_trust_certs,
        settings.pulsar_tls_certfile,
        settings.pulsar_tls_keyfile,
        settings.pulsar_tls_allow_insecure,
    )
    return PulsarAdmin(settings.pulsar_admin_url, token=settings.pulsar_token(), tls=tls)


def pulsar_client_factory(settings: Settings) -> Any:
    """``service_url -> pulsar.Client`` with the admin client's token and TLS trust (the Extensible
    brokers' system topics are read with Pulsar's own client)."""

    def make(service_url: str) -> Any:
        import pulsar

        token = settings.pulsar_token()
        client_log = logging.getLogger("pulsar.client")
        if client_log.level == logging.NOTSET:  # its INFO lines (every lookup, every connection) drown ours
            client_log.setLevel(logging.WARNING)
        kw: dict[str, Any] = {"logger": client_log, "operation_timeout_seconds": 10}
        if token:
            kw["authentication"] = pulsar.AuthenticationToken(token)
        if settings.pulsar_tls_trust_certs:
            kw["tls_trust_certs_file_path"] = str(settings.pulsar_tls_trust_certs)
        if settings.pulsar_tls_allow_insecure:
            kw["tls_allow_insecure_connection"] = True
        return pulsar.Client(service_url, **kw)

    return make


def broker_web_url(admin: PulsarAdmin, broker: str, data: Any) -> str | None:
    """Where to ask ``broker`` for its settings: its report's web URL (TLS one when the admin
    client speaks HTTPS), else ``http://<brokerId>``."""
    https = any(u.startswith("https") for u in admin.urls)
    local = getattr(data, "local_data", data)
    url = getattr(local, "web_service_url_tls" if https else "web_service_url", None) or None
    if url:
        return str(url).rstrip("/")
    return f"{'https' if https else 'http'}://{broker}" if broker else None


class PulsarMode:
    """Pulsar mode's guard and lookups; inert in ZooKeeper-native mode (``pulsar_mode`` False)."""

    if TYPE_CHECKING:
        settings: Settings
        store: ZkStore
        config_store: ZkStore | None
        metrics: MetricsSink
        _loadview: LoadView

        _last_cycle_ok: float | None

        def is_leader(self) -> bool: ...

        def _publish_view(self) -> Any: ...

    pulsar_mode: bool = False
    pulsar_admin: PulsarAdmin | None = None
    pulsar_kinds: BrokerKinds | None = None
    _verdict: Verdict | None = None

    def _init_pulsar(self, settings: Settings) -> PulsarAdminExecutor | None:
        self.pulsar_mode = settings.pulsar_mode
        self._verdict = None
        self._pulsar_wake = threading.Event()
        self._pulsar_stop = threading.Event()
        self._pulsar_thread: threading.Thread | None = None
        self._last_reason: str | None = NOT_CHECKED
        if not self.pulsar_mode:
            return None
        self.pulsar_admin = pulsar_admin(settings)
        self.pulsar_kinds = BrokerKinds(
            self.pulsar_admin,
            pulsar_client_factory(settings),
            lambda root: read_metadata_channel(self.store, root),
            on_ready=self._pulsar_wake.set,  # check again at once: loadmgr may act now
        )
        admin = self.pulsar_admin
        warmer = Warmer(
            admin.status,
            "https" if any(u.startswith("https") for u in admin.urls) else "http",
            settings.pulsar_warm_up_timeout_s,
            on_result=lambda result, seconds: self.metrics.warm_up(result, seconds),
        )
        return PulsarAdminExecutor(admin, warmer=warmer, may_write=lambda: self.is_leader())

    @property
    def election_path(self) -> str:
        return P.LOADMGR_LEADER if self.pulsar_mode else P.LEADER

    def _start_pulsar(self) -> None:
        if not self.pulsar_mode:
            return
        if self.pulsar_kinds is not None:
            self._loadview.overlay = self.pulsar_kinds.view
            self._loadview.owners_elsewhere = self.pulsar_kinds.owners
        self._watch_brokers()
        self._pulsar_thread = threading.Thread(target=self._pulsar_loop, name="pulsar-settings", daemon=True)
        self._pulsar_thread.start()

    def _watch_brokers(self) -> None:
        """Wake the settings check when a broker joins or leaves. ``/loadbalance/brokers`` is Pulsar's:
        while it does not exist it is watched for creation (nothing is created), and a children watch
        follows it whenever it exists (kazoo's ends when the node is deleted)."""
        client = self.store.client
        following = threading.Event()

        def on_children(_children: list[str]) -> bool | None:
            self._pulsar_wake.set()
            return None

        def on_node(_data: bytes | None, stat: Any, *_: Any) -> bool | None:
            self._pulsar_wake.set()
            if stat is None:
                following.clear()  # gone: its children watch has ended
            elif not following.is_set():
                following.set()
                client.ChildrenWatch(P.BROKERS, on_children, send_event=False)
            return None

        client.DataWatch(P.BROKERS, on_node)

    def _stop_pulsar(self) -> None:
        self._pulsar_stop.set()
        self._pulsar_wake.set()
        if self._pulsar_thread is not None:
            self._pulsar_thread.join(timeout=5)
        if self.pulsar_kinds is not None:
            self.pulsar_kinds.close()
        if self.pulsar_admin is not None:
            self.pulsar_admin.close()

    def wake_settings_check(self) -> None:
        if self.pulsar_mode:
            self._pulsar_wake.set()

    def _pulsar_loop(self) -> None:
        while not self._pulsar_stop.is_set():
            self._pulsar_wake.clear()
            try:
                self.check_broker_settings()
            except Exception:  # the thread must live: the next round checks again
                log.exception("checking the Pulsar brokers' settings failed")
            self._pulsar_wake.wait(self.settings.pulsar_check_interval_s)

    def check_broker_settings(self) -> Verdict:
        """Read every registered broker's settings now; log a line when the verdict changes."""
        assert self.pulsar_admin is not None
        brokers = self.store.read_brokers() if self.store.connected else {}
        dynamic_doc = self.store.get_json(P.PULSAR_DYNAMIC_CONFIG) if self.store.connected else None
        dynamic = (
            {str(k): str(v) for k, v in dynamic_doc.value.items()}
            if dynamic_doc is not None and isinstance(dynamic_doc.value, dict)
            else {}
        )
        admin = self.pulsar_admin
        verdict = check(brokers, admin, dynamic, lambda b, d: broker_web_url(admin, b, d))
        if verdict.kind is not None and self.pulsar_kinds is not None:
            kind = self.pulsar_kinds.use(verdict.kind, verdict.table_view)
            kind.view(brokers, {})  # the registry the kind's own reads start from (a follower's too)
            waiting = kind.waiting()
            if waiting is not None:
                verdict = dataclasses.replace(verdict, waiting=(waiting,))
        self._verdict = verdict
        reason = None if verdict.clear else verdict.reason()
        if reason != self._last_reason:
            if reason is None:
                log.info(
                    "Pulsar brokers' own shedding and auto-split are off on %d broker(s): loadmgr acts",
                    len(verdict.brokers),
                )
            elif self.settings.pulsar_beside_brokers:
                log.warning(
                    "Pulsar brokers' own load manager is active (%s): loadmgr runs beside it in dry-run",
                    reason,
                )
            else:
                log.error(
                    "refusing to act: %s; set loadBalancerSheddingEnabled=false and "
                    "loadBalancerAutoBundleSplitEnabled=false on every broker "
                    "(or LOADMGR_PULSAR_BESIDE_BROKERS=true for a dry-run beside them)",
                    reason,
                )
            self._last_reason = reason
        self.metrics.pulsar_settings(len(verdict.conflicts) + len(verdict.unreachable), self.pulsar_acting())
        return verdict

    def pulsar_acting(self) -> bool:
        """True when loadmgr may unload and split (always in ZooKeeper-native mode)."""
        if not self.pulsar_mode:
            return True
        return self._verdict is not None and self._verdict.clear

    def pulsar_reason(self) -> str | None:
        """Why loadmgr does not act in Pulsar mode (None: it acts, or not in Pulsar mode)."""
        if not self.pulsar_mode or self.pulsar_acting():
            return None
        return NOT_CHECKED if self._verdict is None else self._verdict.reason()

    def _require_may_act(self) -> None:
        reason = self.pulsar_reason()
        if reason is not None:
            mode = " (dry-run beside the brokers)" if self.settings.pulsar_beside_brokers else ""
            raise PreconditionFailed("brokers", reason, f"loadmgr does not act on Pulsar's brokers{mode}")

    def _pulsar_lookup(self, topic: str, assign: bool = True) -> str | None:
        """Pulsar mode: the broker serving ``topic`` (None in ZooKeeper-native mode).

        Pulsar's lookup assigns an unowned bundle, which is a change in Pulsar: only an admin's lookup
        (``assign``) goes there, with the super-user token. Anyone else is answered from the
        ownership nodes alone, read in ZooKeeper, and an unowned bundle is AdminRequired, as in
        ZooKeeper-native mode: a read token never makes Pulsar do anything."""
        if not self.pulsar_mode or self.pulsar_admin is None:
            return None
        if not assign:
            return self._pulsar_owner(topic)
        try:
            return self.pulsar_admin.lookup(topic)
        except ExecutorError as e:
            raise ServiceError(f"Pulsar's lookup of {topic} failed: {e}") from None

    def _pulsar_owner(self, topic: str) -> str:
        ns = topic_namespace(topic)
        got = self.store.read_layout(ns)
        layout = got.value if got is not None else self._policies_layout(ns)
        if layout is None:
            raise UnknownBundle(f"namespace {ns} has no bundle layout")
        bundle = layout.find_bundle(topic)
        owner = self.store.read_owner(bundle)
        if owner is None:
            raise AdminRequired(
                f"{bundle} has no owner; Pulsar's lookup would assign it, which needs the admin role"
            )
        return owner.broker

    def _policies_layout(self, ns: str) -> NamespaceBundles | None:
        """The layout in the namespace's Policies (configuration store), for a namespace no broker
        has loaded yet (Pulsar's fallback when there are no local policies)."""
        got = (self.config_store or self.store).read_policies_layout(ns)
        return None if got is None else got.value

    def _pulsar_may_run(self, name: str) -> bool:
        """Pulsar mode: Modular's leader broker writes bundle data (Extensible brokers keep none:
        loadmgr writes it then); shedding and splits wait until the brokers' own are known to be
        off (dry-run beside them publishes the view only)."""
        kinds = self.pulsar_kinds
        if name == "bundle-data" and (kinds is None or not kinds.current.writes_bundle_data):
            return False
        if self.pulsar_acting():
            return True
        if name == "shedding":
            with contextlib.suppress(ServiceError):
                self._publish_view()
            if self.settings.pulsar_beside_brokers:
                self._last_cycle_ok = time.monotonic()  # deciding in dry-run is this leader's work now
        return False
