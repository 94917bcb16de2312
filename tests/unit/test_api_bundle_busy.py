"""A bundle another unload or split is moving right now (Pulsar mode) answers 409 ``BundleBusy``
naming it, like the other conflicts, never a 500."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.api import errors
from service.errors import BundleBusy


def test_bundle_busy_is_a_409_naming_the_bundle() -> None:
    app = FastAPI()
    errors.install(app)

    @app.post("/busy")
    def busy() -> None:
        raise BundleBusy("public/default/0x00000000_0x40000000: an unload or split of it is under way")

    r = TestClient(app).post("/busy")
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "BundleBusy"
    assert "0x00000000_0x40000000" in r.json()["detail"]["reason"]
