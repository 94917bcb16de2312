"""What ``loadmgr serve`` checks before it joins the election: a value that can only fail later
(an address nobody can bind, a certificate file that is missing or not PEM) must fail now, as one
line naming it with exit 2, not after this instance became the leader."""

from __future__ import annotations

import contextlib
import socket
import ssl

from balancer.errors import ConfigError
from service.settings import Settings


def check_tls_files(settings: Settings) -> None:
    """The HTTPS certificate and key load as a pair (ConfigError naming the file otherwise)."""
    cert, key = settings.http_tls_certfile, settings.http_tls_keyfile
    if cert is None or key is None:
        return
    for field, path in (("http_tls_certfile", cert), ("http_tls_keyfile", key)):
        if not path.is_file():
            raise ConfigError(field, str(path), "no such file")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(
            "http_tls_certfile", str(cert), f"not a PEM certificate with the key {key}: {e.strerror or e}"
        ) from None


def check_bindable(settings: Settings) -> None:
    """The REST address resolves and can be bound now (the socket is closed again at once)."""
    host, port = settings.http_host, settings.http_port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise ConfigError("http_host", host, f"does not resolve: {e}") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
    except OSError as e:
        raise ConfigError("http_host", f"{host}:{port}", f"cannot listen there: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            sock.close()


def check_zookeeper_answers(settings: Settings) -> None:
    """Something listens at the ZooKeeper address: else one line now, not a ZooKeeper client's retries."""
    from service.commands.zk_probe import answers
    from service.errors import StoreUnavailable

    if not answers(settings.zk_hosts):
        raise StoreUnavailable(
            f"no ZooKeeper answers at {settings.zk_hosts} (--zk, LOADMGR_ZK_HOSTS): is it running?"
        )


def check_before_start(settings: Settings) -> None:
    check_tls_files(settings)
    check_bindable(settings)
    check_zookeeper_answers(settings)
