"""Who loadmgr is to ZooKeeper, what ACL its nodes get, and how the session is encrypted.

A secured Pulsar metadata store is set up with digest (or SASL) identities and per-node ACLs;
loadmgr joins it the same way. Every node it creates gets :attr:`ZkSecurity.acl`:

* with credentials and no explicit ACL: creator-all plus world-read (``auth::cdrwa,world:anyone:r``),
  so anyone may read the cluster's state but only a session holding loadmgr's identity can change
  or delete what it wrote (the leader node included, which is what makes it hard to impersonate);
* an explicit ``zk_acl`` list, in ZooKeeper's ``scheme:id:perms`` form, for shared identities
  (e.g. also granting the Pulsar brokers' digest ``cdrwa`` on nodes both sides write);
* without credentials: ZooKeeper's open ACL, and loadmgr says so loudly at start.

The same ``user:password`` authenticates either with the ``digest`` scheme (ZooKeeper's built-in
provider; the ACL id is ``digest:user:<hash>``) or through SASL DIGEST-MD5 (the server's JAAS
``Server`` section lists the users; the ACL id is ``sasl:user``), as kazoo supports both.

ZooKeeper accepts any digest password (a wrong one is just another identity), so a wrong password
shows only when a write is refused; :meth:`service.zookeeper.session.nodes.JsonZk.start` therefore probes
one write under ``/loadmgr`` and fails fast with one line. A wrong SASL password is refused at
connect time, which ``start`` reports the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions

from balancer.errors import ConfigError
from service.settings import Settings

# in ZooKeeper's own order, so acl_text() reads like zkCli's getAcl
_PERMS = {
    "c": Permissions.CREATE,
    "d": Permissions.DELETE,
    "r": Permissions.READ,
    "w": Permissions.WRITE,
    "a": Permissions.ADMIN,
}


def parse_acl(text: str, field_name: str = "zk_acl") -> list[ACL]:
    """``scheme:id:perms`` entries, comma-separated; the id may itself hold ``:`` (digest user:hash)."""
    out: list[ACL] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        scheme, sep, rest = entry.partition(":")
        ident, sep2, perms = rest.rpartition(":")
        if not sep or not sep2 or not scheme:
            raise ConfigError(field_name, entry, "an ACL entry is scheme:id:perms, e.g. world:anyone:r")
        if not perms or any(p not in _PERMS for p in perms):
            raise ConfigError(field_name, entry, "perms are letters of 'cdrwa'")
        mask = 0
        for p in perms:
            mask |= _PERMS[p]
        out.append(ACL(mask, Id(scheme, ident)))
    if not out:
        raise ConfigError(field_name, text, "no ACL entries")
    return out


def acl_text(acl: list[ACL]) -> str:
    """The ACL in the form operators write it (for logs and errors)."""
    parts = []
    for a in acl:
        perms = "".join(p for p, bit in _PERMS.items() if a.perms & bit)
        parts.append(f"{a.id.scheme}:{a.id.id}:{perms}")
    return ",".join(parts)


@dataclass(frozen=True)
class ZkSecurity:
    """Credentials, node ACL and TLS of one kazoo session (:meth:`kazoo_kwargs`)."""

    digest: str | None = None  # "user:password"
    scheme: str = "digest"  # or "sasl"
    acl: list[ACL] = field(default_factory=lambda: list(OPEN_ACL_UNSAFE))
    tls: bool = False
    ca: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    verify_certs: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> ZkSecurity:
        digest = settings.zk_credentials()
        if digest is not None and ":" not in digest:
            raise ConfigError("zk_auth", "<hidden>", "credentials are user:password")
        scheme = settings.zk_auth_scheme.strip().lower()
        if scheme not in ("digest", "sasl"):
            raise ConfigError("zk_auth_scheme", settings.zk_auth_scheme, "digest or sasl")
        if scheme == "sasl":
            try:
                import puresasl  # noqa: F401
            except ImportError:
                raise ConfigError(
                    "zk_auth_scheme", "sasl", "kazoo's SASL needs the pure-sasl package"
                ) from None
        if settings.zk_acl.strip():
            acl = parse_acl(settings.zk_acl)
        elif digest is not None:
            acl = [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]
        else:
            acl = list(OPEN_ACL_UNSAFE)
        if any(a.id.scheme == "auth" for a in acl) and digest is None:
            raise ConfigError("zk_acl", settings.zk_acl, "an 'auth' entry needs zk_auth credentials")
        if (settings.zk_tls_certfile is None) != (settings.zk_tls_keyfile is None):
            raise ConfigError(
                "zk_tls_keyfile", str(settings.zk_tls_keyfile), "a client certificate needs its key"
            )
        for name in ("zk_tls_ca", "zk_tls_certfile", "zk_tls_keyfile"):
            path = getattr(settings, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(name, str(path), "no such file")
        return cls(
            digest=digest,
            scheme=scheme,
            acl=acl,
            tls=settings.zk_tls,
            ca=settings.zk_tls_ca,
            certfile=settings.zk_tls_certfile,
            keyfile=settings.zk_tls_keyfile,
            verify_certs=settings.zk_tls_verify,
        )

    @property
    def user(self) -> str | None:
        return None if self.digest is None else self.digest.split(":", 1)[0]

    @property
    def open(self) -> bool:
        """True when anyone may change the nodes loadmgr creates."""
        return any(a.id.scheme == "world" and a.perms & Permissions.WRITE for a in self.acl)

    def describe(self) -> str:
        how = "SASL DIGEST-MD5" if self.scheme == "sasl" else "digest"
        who = f"{how} user {self.user!r}" if self.user else "anonymous"
        return f"{who}, ACL {acl_text(self.acl)}, {'TLS' if self.tls else 'plain TCP'}"

    def kazoo_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"default_acl": self.acl}
        if self.digest is not None and self.scheme == "sasl":
            user, password = self.digest.split(":", 1)
            kw["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
        elif self.digest is not None:
            kw["auth_data"] = [("digest", self.digest)]
        if self.tls:
            # The server's name is checked against its certificate too, not just the chain: a CA that
            # signs many hosts must not let one of them pose as the ensemble.
            kw.update(use_ssl=True, verify_certs=self.verify_certs, check_hostname=self.verify_certs)
            if self.ca is not None:
                kw["ca"] = str(self.ca)
            if self.certfile is not None and self.keyfile is not None:
                kw["certfile"] = str(self.certfile)
                kw["keyfile"] = str(self.keyfile)
        return kw
