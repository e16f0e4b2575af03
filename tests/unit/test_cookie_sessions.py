"""The web's cookie sessions: a request without the cookie (every Bearer-token API call)
builds no signer and writes nothing; a cookie still round-trips, and a forged one reads as
empty."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask, session

from app.http.cookie_sessions import CookieSessions


@pytest.fixture()
def app(monkeypatch: pytest.MonkeyPatch) -> tuple[Flask, list[int]]:
    flask_app = Flask(__name__)
    flask_app.secret_key = "k" * 32
    flask_app.session_interface = CookieSessions()
    built: list[int] = []
    original = CookieSessions.get_signing_serializer

    def counting(self: CookieSessions, app: Flask) -> Any:
        built.append(1)
        return original(self, app)

    monkeypatch.setattr(CookieSessions, "get_signing_serializer", counting)

    @flask_app.get("/api/ping")
    def ping() -> str:
        return "pong"

    @flask_app.get("/whoami")
    def whoami() -> str:
        return str(session.get("user", "nobody"))

    @flask_app.post("/sign-in")
    def sign_in() -> str:
        session["user"] = "ada"
        return "ok"

    @flask_app.post("/sign-out")
    def sign_out() -> str:
        session.clear()
        return "bye"

    return flask_app, built


def test_a_request_without_the_cookie_builds_no_signer_and_sets_nothing(app) -> None:
    flask_app, built = app
    response = flask_app.test_client().get("/api/ping", headers={"Authorization": "Bearer t"})
    assert response.status_code == 200
    assert built == []
    assert "Set-Cookie" not in response.headers and "Vary" not in response.headers


def test_a_read_without_the_cookie_still_varies_on_it(app) -> None:
    flask_app, _ = app
    response = flask_app.test_client().get("/whoami")
    assert response.text == "nobody"
    assert "Cookie" in response.headers.get("Vary", "")
    assert "Set-Cookie" not in response.headers


def test_a_session_round_trips_and_sign_out_deletes_the_cookie(app) -> None:
    flask_app, _ = app
    client = flask_app.test_client()
    assert "session=" in client.post("/sign-in").headers["Set-Cookie"]
    assert client.get("/whoami").text == "ada"
    gone = client.post("/sign-out").headers["Set-Cookie"]
    assert "Expires=Thu, 01 Jan 1970" in gone
    assert client.get("/whoami").text == "nobody"


def test_a_forged_cookie_reads_as_empty(app) -> None:
    flask_app, _ = app
    client = flask_app.test_client()
    client.set_cookie("session", "eyJ1c2VyIjoiZXZlIn0.forged.signature")
    assert client.get("/whoami").text == "nobody"
