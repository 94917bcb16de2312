"""The HTTP face of every ``loadmgr serve`` instance: the FastAPI app (``create_app(service, settings)``)
with one router per resource, its schemas and error translation, and the Prometheus exposition
(``metrics``, with its scrape-time collectors in ``metric_collectors``). Handlers talk to the leader's
service object through the protocol in ``deps``.
May import :mod:`service.leader` and the foundation; never the broker side or the commands.
"""

from service.api.app import create_app

__all__ = ["create_app"]
