"""A throw-away CA and a server certificate for 127.0.0.1, made with the ``openssl`` command.

Used by the TLS tests for both ZooKeeper's secureClientPort and loadmgr's HTTPS. Nothing here is
secret: the files live in the test's tmp_path and are valid for two days.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_SERVER_EXT = """\
subjectAltName = IP:127.0.0.1, DNS:localhost
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
"""


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA certificate (trust anchor)
    cert: Path  # server certificate, signed by the CA, for 127.0.0.1 and localhost
    key: Path  # its PKCS#8 private key
    keystore: Path  # cert + key in one PEM, the form ZooKeeper's PEM keystore reads


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str = "loadmgr test CA") -> TlsFiles:
    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests need the openssl command (apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1",
        cwd=directory,
    )  # fmt: skip
    (directory / "server.ext").write_text(_SERVER_EXT)
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
        cwd=directory,
    )  # fmt: skip
    keystore = directory / "keystore.pem"
    keystore.write_text((directory / "server.pem").read_text() + (directory / "server.key").read_text())
    return TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key", keystore)
