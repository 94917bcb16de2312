"""Whether ``/loadbalance/leader`` names a real loadmgr instance a follower may forward a request to.

The node is readable by anyone and, on an open ZooKeeper, writable by anyone too, so what it says
is checked before a follower sends it an operator's request and bearer token:

* a signature: the leader writes ``loadmgrSignature``, an HMAC-SHA256 of its id, its URL, the
  ZooKeeper session that owns the ephemeral node and the leader epoch it won (``loadmgrEpoch``),
  under a key derived from the admin token (which every instance of the cluster holds and ZooKeeper
  never sees). A forged node cannot carry a valid one. A replayed one cannot either: a follower
  checks the signature against the node's ``Stat.ephemeralOwner`` and the current epoch, and
  whoever recreates the node (after the leader died) owns it with another session, while a new
  leader's epoch is higher than any recorded one;
* and/or an allow-list (``leader_urls``): the URLs the operator deployed instances at.

With neither (no admin token, no list) there is no secret to leak, the API is open anyway, and
the node is trusted as Pulsar does. Only ``http``/``https`` URLs are ever used.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SIGNATURE_KEY = "loadmgrSignature"
EPOCH_KEY = "loadmgrEpoch"
_KEY_CONTEXT = b"loadmgr /loadbalance/leader identity v1"


def _normalize(url: str) -> str:
    return url.strip().rstrip("/")


@dataclass(frozen=True)
class LeaderIdentity:
    key: bytes | None = None
    allowed: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, admin_token: str | None, leader_urls: str = "") -> LeaderIdentity:
        # A derived key, so the node never holds anything that opens the API even if HMAC leaked.
        key = hmac.new(admin_token.encode(), _KEY_CONTEXT, hashlib.sha256).digest() if admin_token else None
        allowed = frozenset(_normalize(u) for u in leader_urls.split(",") if u.strip())
        return cls(key, allowed)

    @property
    def enforced(self) -> bool:
        return self.key is not None or bool(self.allowed)

    def signature(self, broker_id: str, service_url: str, session_id: int, epoch: int) -> str:
        assert self.key is not None
        msg = f"{broker_id}\n{_normalize(service_url)}\nsession {session_id:#x}\nepoch {epoch}".encode()
        return hmac.new(self.key, msg, hashlib.sha256).hexdigest()

    def document(
        self, broker_id: str, service_url: str, session_id: int | None = None, epoch: int | None = None
    ) -> dict[str, Any]:
        """What the leader writes to its node: Pulsar's two fields, plus, once it holds the node with
        ``session_id`` and has won ``epoch``, the epoch and the signature binding both (when keyed)."""
        doc: dict[str, Any] = {"brokerId": broker_id, "serviceUrl": service_url}
        if session_id is not None and epoch is not None:
            doc[EPOCH_KEY] = epoch
            if self.key is not None:
                doc[SIGNATURE_KEY] = self.signature(broker_id, service_url, session_id, epoch)
        return doc

    def verify(
        self, info: dict[str, Any] | None, owner_session: int | None = None, current_epoch: int | None = None
    ) -> tuple[str | None, str]:
        """``(url, "")`` when the node may be forwarded to, else ``(None, why not)``.

        ``owner_session`` is the node's ``Stat.ephemeralOwner`` and ``current_epoch`` the version of
        ``/loadmgr/leader-epoch``, both read from ZooKeeper with the node: a signed node is only
        valid for the session that owns it, in the epoch it won.
        """
        if not info:
            return None, "no leader node"
        url, broker = info.get("serviceUrl"), info.get("brokerId")
        if not isinstance(url, str) or not isinstance(broker, str):
            return None, "the leader node has no brokerId/serviceUrl strings"
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None, f"the leader node's serviceUrl {url!r} is not an http(s) URL"
        if self.allowed and _normalize(url) not in self.allowed:
            return None, f"the leader node's serviceUrl {url!r} is not among leader_urls"
        if self.key is not None:
            given, epoch = info.get(SIGNATURE_KEY), info.get(EPOCH_KEY)
            if not isinstance(given, str) or type(epoch) is not int or owner_session is None:
                return None, "the leader node's signature does not verify (unsigned, or not yet signed)"
            if not hmac.compare_digest(given, self.signature(broker, url, owner_session, epoch)):
                return None, (
                    "the leader node's signature does not verify (written by someone else, or replayed"
                    " by a session that does not own it)"
                )
            if current_epoch is not None and epoch != current_epoch:
                return (
                    None,
                    f"the leader node is from epoch {epoch}, not the current {current_epoch} (replayed)",
                )
        return _normalize(url), ""
