"""Where a CLI verb finds the cluster: its flag, then the environment, then a running ``loadmgr demo``
(:mod:`service.demo.state`), then the default. So ``loadmgr status`` after ``make run`` needs no flags."""

from __future__ import annotations

import os

from service.demo.state import read_state

DEFAULT_URL = "http://127.0.0.1:8080"


def rest_url(flag: str | None) -> str:
    """The REST base URL: ``--url``, ``LOADMGR_URL``, the running demo's, else :data:`DEFAULT_URL`."""
    if flag:
        return flag
    env = os.environ.get("LOADMGR_URL")
    if env:
        return env
    demo = read_state()
    return demo.url if demo is not None else DEFAULT_URL


def demo_url() -> str | None:
    """The running demo's REST URL when neither ``LOADMGR_URL`` nor ZooKeeper settings point elsewhere."""
    if os.environ.get("LOADMGR_URL") or os.environ.get("LOADMGR_ZK_HOSTS"):
        return None
    demo = read_state()
    return demo.url if demo is not None else None


def zk_hosts(flag: str | None) -> str | None:
    """ZooKeeper hosts: ``--zk``, else ``LOADMGR_ZK_HOSTS`` (None: let Settings read it), else the running
    demo's, else None (Settings' default)."""
    if flag:
        return flag
    if os.environ.get("LOADMGR_ZK_HOSTS"):
        return None
    demo = read_state()
    return demo.zk_hosts if demo is not None else None
