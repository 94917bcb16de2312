"""Where a CLI verb finds the cluster: its flag, then the environment, then the running ``loadmgr demo``
or ``loadmgr serve --mode pulsar`` this directory means (:func:`service.demo.state.target`: refused,
naming them, when more than one could be meant), then the default. So ``loadmgr status`` after
``make run`` needs no flags, and never answers from another checkout's system by accident."""

from __future__ import annotations

import atexit
import os
from typing import TYPE_CHECKING

from service.demo.state import DemoState, remove_state, target, write_state

if TYPE_CHECKING:
    from service.settings import Settings

DEFAULT_URL = "http://127.0.0.1:8080"


def rest_url(flag: str | None) -> str:
    """The REST base URL: ``--url``, ``LOADMGR_URL``, the running system's, else :data:`DEFAULT_URL`."""
    if flag:
        return flag
    env = os.environ.get("LOADMGR_URL")
    if env:
        return env
    found = target()
    return found.url if found is not None else DEFAULT_URL


def demo_url() -> str | None:
    """The running system's REST URL when neither ``LOADMGR_URL`` nor ZooKeeper settings point elsewhere."""
    if os.environ.get("LOADMGR_URL") or os.environ.get("LOADMGR_ZK_HOSTS"):
        return None
    found = target()
    return found.url if found is not None else None


def zk_hosts(flag: str | None) -> str | None:
    """ZooKeeper hosts: ``--zk``, else ``LOADMGR_ZK_HOSTS`` (None: let Settings read it), else the running
    system's, else None (Settings' default)."""
    if flag:
        return flag
    if os.environ.get("LOADMGR_ZK_HOSTS"):
        return None
    found = target()
    return found.zk_hosts if found is not None else None


def register_serving(settings: Settings, history: str | None, cluster: str | None) -> None:
    """``serve --mode pulsar`` records itself where verbs look, as the demo does, so the operator's
    ``loadmgr status`` beside it needs no --url; the record goes when the process exits. A serve with
    port 0 has no address to record yet and is left out (verbs then need --url)."""
    if not settings.pulsar_mode or settings.http_port == 0:
        return
    record = DemoState(
        os.getpid(),
        settings.service_url(),
        settings.zk_hosts,
        os.path.abspath(history) if history and "://" not in history else history,
        os.getcwd(),
        "pulsar",
        cluster,
    )
    written = write_state(record)
    if written is not None:
        atexit.register(remove_state, os.getpid(), written)
