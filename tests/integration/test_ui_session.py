"""The web UI's cookie session (app.routes.ui + app.http.auth) and the owner-wide job routes.

The browser signs in with an API token and then calls the same /api/* routes with a
signed cookie; unsafe methods must carry the page's CSRF token. Through Flask's test
client against a real database.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.http import web_sessions
from app.http.db import session_factory
from app.http.tokens import create_token, hash_token, revoke_token
from app.routes import ui
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.services.keys import SECRET_FILE, master_key
from tasks.settings import SettingsError, get_settings
from tests.integration.jobdb import tuple_row, tuples

FUTURE = "2099-01-01T00:00:00+00:00"  # keeps a job queued: never dispatched


def new_token(name: str) -> tuple[uuid.UUID, str]:
    with session_scope(session_factory()) as s:
        return create_token(s, name)


def new_project(owner_id: uuid.UUID, name: str) -> str:
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, %s)",
               (project, owner_id, name))
    return project


@pytest.fixture
def app(db: None) -> Flask:
    app = create_app()
    app.config["TESTING"] = True
    return app


@pytest.fixture
def browser(app: Flask) -> Iterator[FlaskClient]:
    with app.test_client() as c:
        yield c


def csrf_of(client: FlaskClient, path: str = "/") -> str:
    html = client.get(path).get_data(as_text=True)
    match = re.search(r'name="csrf-token" content="([^"]+)"', html) or re.search(
        r'name="csrf" value="([^"]+)"', html)
    assert match, html[:500]
    return match.group(1)


def sign_in(client: FlaskClient, token: str, next_: str = "") -> tuple[str, object]:
    csrf = csrf_of(client)
    response = client.post("/signin", data={"csrf": csrf, "token": token, "next": next_})
    return csrf_of(client), response


def session_cookie(client: FlaskClient):
    return client.get_cookie("switchyard_session")


# --- sign in and out --------------------------------------------------------------------------

def test_sign_in_sets_a_signed_httponly_lax_cookie_holding_no_token(
        app: Flask, browser: FlaskClient) -> None:
    _, token = new_token("alice")
    assert b'action="/signin"' in browser.get("/").data  # signed out: the sign-in form

    _, response = sign_in(browser, token)

    assert response.status_code == 303 and response.headers["Location"] == "/"
    set_cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Lax" in set_cookie, set_cookie
    cookie = session_cookie(browser)
    stored = app.session_interface.get_signing_serializer(app).loads(cookie.value)
    assert token not in str(stored) and stored["token_sha256"] == hash_token(token)
    assert token[3:] not in cookie.value
    page = browser.get("/").get_data(as_text=True)
    assert 'id="new-project"' in page and "Sign out" in page


@pytest.mark.parametrize("token, why", [
    ("", "Paste an API token"),
    ("sy_not-a-real-token", "not valid"),
], ids=["empty", "unknown"])
def test_a_bad_token_is_refused_with_a_message(browser: FlaskClient, token: str,
                                               why: str) -> None:
    _, response = sign_in(browser, token)
    assert response.status_code == 401
    assert why in response.get_data(as_text=True)
    assert browser.get("/api/projects").status_code == 401


def test_sign_in_without_the_form_csrf_token_is_refused(browser: FlaskClient) -> None:
    _, token = new_token("alice")
    browser.get("/")
    response = browser.post("/signin", data={"csrf": "forged", "token": token})
    assert response.status_code == 401 and "expired" in response.get_data(as_text=True)
    assert browser.get("/api/projects").status_code == 401


@pytest.mark.parametrize("csrf", ["é", "\u2603" * 40, "forged"], ids=["accent", "snowman", "ascii"])
def test_a_wrong_form_csrf_token_is_refused_cleanly_whatever_its_characters(
        browser: FlaskClient, csrf: str) -> None:
    # A non-ASCII value reached compare_digest as str, which raises TypeError: a 500.
    _, token = new_token("alice")
    browser.get("/")
    response = browser.post("/signin", data={"csrf": csrf, "token": token})
    assert response.status_code == 401 and "expired" in response.get_data(as_text=True)
    assert browser.get("/api/projects").status_code == 401

    sign_in(browser, token)
    response = browser.post("/signout", data={"csrf": csrf})
    assert response.status_code == 403, response.status_code
    assert browser.get("/api/projects").status_code == 200, "a forged sign-out signs no one out"


@pytest.mark.parametrize("target, lands", [
    ("/monitor", "/monitor"),
    ("https://evil.example/", "/"),
    ("//evil.example/", "/"),
    ("monitor", "/"),
], ids=["same-site-path", "absolute-url", "scheme-relative", "relative"])
def test_sign_in_returns_to_a_local_page_only(browser: FlaskClient, target: str,
                                              lands: str) -> None:
    _, token = new_token("alice")
    _, response = sign_in(browser, token, target)
    assert response.headers["Location"] == lands


def test_pages_redirect_to_sign_in_then_back(browser: FlaskClient) -> None:
    response = browser.get("/monitor")
    assert response.status_code == 302
    assert response.headers["Location"] == "/?next=/monitor"


def test_sign_out_ends_the_session(browser: FlaskClient) -> None:
    _, token = new_token("alice")
    csrf, _ = sign_in(browser, token)
    assert browser.get("/api/projects").status_code == 200

    response = browser.post("/signout", data={"csrf": csrf})

    assert response.status_code == 303
    assert browser.get("/api/projects").status_code == 401
    assert browser.get("/monitor").status_code == 302


def test_a_cookie_replayed_after_sign_out_no_longer_authenticates(app: Flask,
                                                                   browser: FlaskClient) -> None:
    # Given a signed-in browser whose cookie someone copied
    _, token = new_token("alice")
    csrf, _ = sign_in(browser, token)
    assert browser.get("/api/projects").status_code == 200
    copied = session_cookie(browser).value
    # When the browser signs out
    assert browser.post("/signout", data={"csrf": csrf}).status_code == 303
    # Then the copy is worth nothing, on the API and on the pages
    thief = app.test_client()
    thief.set_cookie("switchyard_session", copied)
    assert thief.get("/api/projects").status_code == 401
    assert thief.get("/monitor").status_code == 302
    # while signing in again works, and another browser's session of the same token lives on
    other = app.test_client()
    sign_in(other, token)
    sign_in(browser, token)
    assert browser.get("/api/projects").status_code == 200
    assert other.get("/api/projects").status_code == 200


def test_ended_sessions_are_kept_only_while_their_cookies_could_live(db: None) -> None:
    pg.execute("INSERT INTO ended_web_sessions VALUES ('old', now() - interval '1 second')")
    web_sessions.end("new")
    rows = dict(tuples("SELECT session_id, forget_after - now() FROM ended_web_sessions"))
    assert set(rows) == {"new"}
    assert rows["new"] > web_sessions.MAX_AGE  # a margin for the web host's clock


def test_a_copy_kept_alive_by_renewals_never_outlives_its_sign_out(
        app: Flask, browser: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request re-signs a cookie, a thief's copy too: the session's age, not the
    cookie's, ends it, and the sign-out's row is kept until then (found in review)."""
    import itsdangerous.timed as timed

    real = timed.TimestampSigner.get_timestamp
    offset = {"s": 0}
    monkeypatch.setattr(timed.TimestampSigner, "get_timestamp",
                        lambda self: real(self) + offset["s"])
    _, token = new_token("alice")
    csrf, _ = sign_in(browser, token)
    copied = session_cookie(browser).value
    assert browser.post("/signout", data={"csrf": csrf}).status_code == 303
    thief = app.test_client()
    thief.set_cookie("switchyard_session", copied)
    assert thief.get("/api/projects").status_code == 401
    # and the refused copy is not renewed: the answer deletes it
    assert session_cookie(thief) is None
    # Even a copy renewed all along (re-signed now, a week and a day on) and outliving the
    # sign-out's row is refused: the session is older than any session may be
    serializer = app.session_interface.get_signing_serializer(app)
    data = serializer.loads(copied)
    offset["s"] = int(web_sessions.MAX_AGE.total_seconds()) + 86400
    now = __import__("time").time() + offset["s"]
    monkeypatch.setattr(web_sessions.time, "time", lambda: now)
    thief.set_cookie("switchyard_session", serializer.dumps(data))
    pg.execute("DELETE FROM ended_web_sessions")
    assert thief.get("/api/projects").status_code == 401


def test_revoking_the_token_signs_the_browser_out(browser: FlaskClient) -> None:
    _, token = new_token("alice")
    sign_in(browser, token)
    with session_scope(session_factory()) as s:
        revoke_token(s, token[:9])
    assert browser.get("/api/projects").status_code == 401
    assert browser.get("/monitor").status_code == 302


def test_pages_send_a_content_security_policy(browser: FlaskClient) -> None:
    response = browser.get("/")
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    asset = re.search(r'src="(/assets/\w+/ui\.js)"', response.get_data(as_text=True))
    assert asset and browser.get(asset.group(1)).status_code == 200


def test_assets_are_served_under_one_version_and_cached_for_good_under_it(
        browser: FlaskClient) -> None:
    # Given the page's module URL, /assets/<version>/project.js
    sign_in(browser, new_token("alice")[1])
    page = browser.get(f"/projects/{uuid.uuid4()}").get_data(as_text=True)
    found = re.search(r'<script type="module" src="/assets/(\w+)/project\.js">', page)
    assert found
    version = found.group(1)
    # When a module imports ./ui.js, the browser asks for it under the same version,
    # which is cached for good (a change to any asset changes the version)
    answer = browser.get(f"/assets/{version}/ui.js")
    assert answer.status_code == 200
    assert answer.mimetype == "text/javascript"
    assert answer.cache_control.immutable and answer.cache_control.max_age == 365 * 24 * 3600
    # Then a page from before a deploy still gets the file, revalidated on every use
    stale = browser.get("/assets/0123456789/ui.js")
    assert stale.status_code == 200 and stale.cache_control.no_cache
    assert not stale.cache_control.immutable and stale.cache_control.max_age is None
    assert browser.get(f"/assets/{version}/no-such.js").status_code == 404


# --- the API with the cookie ------------------------------------------------------------------

def test_the_cookie_authenticates_reads_and_csrf_guards_writes(browser: FlaskClient) -> None:
    owner, token = new_token("alice")
    mine = new_project(owner, "mine")
    csrf, _ = sign_in(browser, token)

    assert [p["id"] for p in browser.get("/api/projects").get_json()["items"]] == [mine]

    # Given the cookie, a write without the page's CSRF token is refused and writes nothing.
    for headers in ({}, {"X-CSRF-Token": "guess"}):
        r = browser.post("/api/projects", json={"name": "forged"}, headers=headers)
        assert r.status_code == 403 and r.get_json()["error"]["code"] == "csrf_failed"
    assert tuple_row("SELECT count(*) FROM projects WHERE name = 'forged'")[0] == 0

    r = browser.post("/api/projects", json={"name": "real"}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 201, r.get_json()


def test_the_cookie_sees_only_its_owners_data(browser: FlaskClient) -> None:
    _, token = new_token("alice")
    bob, _ = new_token("bob")
    theirs = new_project(bob, "bob's")
    sign_in(browser, token)
    assert browser.get(f"/api/projects/{theirs}").status_code == 404
    assert browser.get("/api/projects").get_json()["items"] == []


def test_a_bearer_header_wins_over_the_cookie(browser: FlaskClient) -> None:
    alice, token = new_token("alice")
    _, bob_token = new_token("bob")
    new_project(alice, "alice's")
    sign_in(browser, token)
    r = browser.get("/api/projects", headers={"Authorization": f"Bearer {bob_token}"})
    assert r.get_json()["items"] == []  # bob's view: the header decides, not the cookie
    r = browser.post("/api/projects", json={"name": "bob's"},
                     headers={"Authorization": f"Bearer {bob_token}"})
    assert r.status_code == 201  # a Bearer call needs no CSRF token


def test_websockets_do_not_take_the_cookie(browser: FlaskClient) -> None:
    owner, token = new_token("alice")
    project = new_project(owner, "p")
    sign_in(browser, token)
    assert browser.get(f"/ws/projects/{project}").status_code == 401


@pytest.mark.parametrize("public_url, override, secure", [
    ("https://switchyard.example.com", None, True),  # behind TLS: the cookie never goes in clear
    ("http://127.0.0.1:8000", None, False),  # `switchyard up` on this machine
    ("", None, False),  # not said: as before
    ("https://switchyard.example.com", "false", False),  # an explicit setting still wins
], ids=["https", "http", "unset", "explicit-off"])
def test_the_cookie_is_https_only_when_the_public_url_is_https(
        db: None, monkeypatch: pytest.MonkeyPatch, settings_env, public_url: str,
        override: str | None, secure: bool) -> None:
    monkeypatch.delenv("SWITCHYARD_SECURE_COOKIES", raising=False)
    settings_env(SWITCHYARD_PUBLIC_URL=public_url,
                 **({} if override is None else {"SWITCHYARD_SECURE_COOKIES": override}))
    app = create_app()
    set_cookie = app.test_client().get("/").headers["Set-Cookie"]
    assert app.config["SESSION_COOKIE_SECURE"] is secure
    assert ("; Secure" in set_cookie) is secure, set_cookie


@pytest.mark.parametrize("bad", ["switchyard.example.com", "ftp://x.example", "https://"])
def test_a_public_url_that_is_no_http_address_is_refused(settings_env, bad: str) -> None:
    settings_env(SWITCHYARD_PUBLIC_URL=bad)
    with pytest.raises(SettingsError, match="SWITCHYARD_PUBLIC_URL"):
        get_settings()


def test_the_signing_key_is_made_once_per_data_dir_and_kept(tmp_path: Path) -> None:
    local = replace(get_settings(), data_dir=tmp_path / "data", secret_key="")
    first = master_key(local)
    assert len(first) >= 40 and master_key(local) == first
    assert (tmp_path / "data" / SECRET_FILE).stat().st_mode & 0o077 == 0
    assert master_key(replace(local, secret_key="from-env")) == "from-env"
    assert timedelta(days=1) >= ui.SESSION_LIFETIME


# --- owner-wide jobs: the monitor's failed list and "retry all matching" ----------------------

def failed_job(project: str, job_type: str = "system.canary") -> str:
    job = str(uuid.uuid4())
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, queue, status, payload, "
               "attempts, max_attempts, completed_at, idempotency_key) "
               "VALUES (%s, %s, %s, 'default', 'failed', '{}', 1, 1, now(), %s)",
               (job, project, job_type, job))
    return job


def test_failed_jobs_list_and_retry_all_are_scoped_to_the_owner_and_filter(
        browser: FlaskClient) -> None:
    alice, token = new_token("alice")
    bob, _ = new_token("bob")
    a1, a2, b1 = new_project(alice, "a1"), new_project(alice, "a2"), new_project(bob, "b1")
    in_a1 = [failed_job(a1), failed_job(a1)]
    in_a2 = failed_job(a2)
    other_type = failed_job(a1, "system.other")
    failed_job(b1)  # another owner's: never listed, never retried
    csrf, _ = sign_in(browser, token)

    listed = browser.get("/api/jobs?status=failed").get_json()["items"]
    assert {j["id"] for j in listed} == {*in_a1, in_a2, other_type}
    assert browser.get(f"/api/jobs?status=failed&project_id={b1}").status_code == 404
    assert browser.get("/api/jobs?status=nope").status_code == 422

    r = browser.post("/api/jobs/retry", json={"project_id": a1, "job_type": "system.canary"},
                     headers={"X-CSRF-Token": csrf})

    assert r.status_code == 202, r.get_json()
    assert sorted(r.get_json()["retried"]) == sorted(in_a1)
    requeued = {str(j) for (j,) in tuples(
        "SELECT job_id FROM agent_job_events WHERE type = 'status' AND data = %s::jsonb",
        (json.dumps({"status": "queued", "from": "failed"}),))}
    assert requeued == set(in_a1)  # (a worker of another test may already be running them)
    assert browser.post("/api/jobs/retry", json={"project_id": b1},
                        headers={"X-CSRF-Token": csrf}).status_code == 404
