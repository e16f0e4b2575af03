"""Project settings over HTTP: set at creation, merged by PATCH, validated strictly."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.startup import mail
from tests.integration.jobdb import tuple_row


@pytest.fixture
def client_and_token(db):
    with session_scope(session_factory()) as session:
        _, token = create_token(session, "settings-owner")
    return create_app().test_client(), {"Authorization": f"Bearer {token}"}


def test_settings_are_set_then_merged(client_and_token) -> None:
    client, auth = client_and_token
    created = client.post("/api/projects", headers=auth, json={
        "name": "Acme", "settings": {"contact_email": "f@acme.test",
                                     "permissions": {"email": True}}})
    assert created.status_code == 201
    pid = created.json["id"]
    assert created.json["settings"] == {"contact_email": "f@acme.test",
                                        "permissions": {"email": True}}
    patched = client.patch(f"/api/projects/{pid}", headers=auth, json={
        "night_shift": True, "settings": {"deploy_hook_url": "https://hooks.test/x"}})
    assert patched.status_code == 200
    assert patched.json["night_shift"] is True
    assert patched.json["settings"] == {"contact_email": "f@acme.test",
                                        "permissions": {"email": True},
                                        "deploy_hook_url": "https://hooks.test/x"}
    assert client.get(f"/api/projects/{pid}", headers=auth).json == patched.json


def test_null_clears_a_setting_and_nested_keys_merge(client_and_token) -> None:
    client, auth = client_and_token
    pid = client.post("/api/projects", headers=auth, json={"name": "Acme", "settings": {
        "contact_email": "f@acme.test", "deploy_hook_url": "https://hooks.test/x",
        "permissions": {"email": True, "deploy_hook": True},
        "caps": {"email_per_day": 5}}}).json["id"]

    patched = client.patch(f"/api/projects/{pid}", headers=auth, json={"settings": {
        "deploy_hook_url": None, "caps": None,
        "permissions": {"email": None, "github_dispatch": False}}})

    assert patched.status_code == 200, patched.json
    assert patched.json["settings"] == {
        "contact_email": "f@acme.test",
        "permissions": {"deploy_hook": True, "github_dispatch": False}}
    assert client.get(f"/api/projects/{pid}", headers=auth).json == patched.json
    # A null for a setting that is not there is no error, and clears nothing else.
    again = client.patch(f"/api/projects/{pid}", headers=auth,
                         json={"settings": {"caps": None, "github_repo": None}})
    assert again.json["settings"] == patched.json["settings"]


@pytest.mark.parametrize(("body", "field"), [
    ({"settings": {"llm_daily_token_budget": -1}}, "settings.llm_daily_token_budget"),
    ({"settings": {"caps": {"email_per_day": "ten"}}}, "settings.caps.email_per_day"),
    ({"settings": {"unknown": 1}}, "settings.unknown"),  # no silent typos
    ({"night_shift": "yes"}, "night_shift"),  # strict: no coercion
])
def test_bad_settings_are_refused_naming_the_field(client_and_token, body, field) -> None:
    client, auth = client_and_token
    pid = client.post("/api/projects", headers=auth, json={"name": "Acme"}).json["id"]
    answer = client.patch(f"/api/projects/{pid}", headers=auth, json=body)
    assert answer.status_code == 422
    assert field in answer.json["error"]["details"]["fields"]
    assert client.get(f"/api/projects/{pid}", headers=auth).json["settings"] == {}


@pytest.mark.parametrize("job_type", ["approval.execute", "email.process_due",
                                      "drip.process_digests", "drip.process_nudges",
                                      "chat.reply"])
def test_internal_job_types_cannot_be_enqueued_over_http(client_and_token, job_type) -> None:
    """Effects run only through approvals and sweeps only from beat: the API refuses them."""

    client, auth = client_and_token
    pid = client.post("/api/projects", headers=auth, json={"name": "Acme"}).json["id"]
    answer = client.post(f"/api/projects/{pid}/jobs", headers=auth,
                         json={"job_type": job_type, "payload": {}})
    assert answer.status_code == 422
    assert answer.json["error"]["code"] == "unknown_job_type"
    assert "internal" in answer.json["error"]["message"]
    assert tuple_row("SELECT count(*) FROM agent_jobs")[0] == 0


@pytest.fixture
def operator(settings_env) -> None:
    """An operator who lets tenants send email and call deploy hooks, at most 100 mails a day."""
    settings_env(SWITCHYARD_EFFECTS_ALLOWED="email,deploy_hook",
                 SWITCHYARD_EFFECT_CAP_CEILINGS="email=100")


@pytest.mark.parametrize(("settings", "field", "says"), [
    ({"permissions": {"github_dispatch": True}}, "settings.permissions.github_dispatch",
     "SWITCHYARD_EFFECTS_ALLOWED"),
    ({"caps": {"email_per_day": 101}}, "settings.caps.email_per_day", "at most 100"),
    ({"caps": {"deploy_hook_per_day": 201}}, "settings.caps.deploy_hook_per_day",
     "at most 200"),
    ({"permissions": {"rocket_launch": True}}, "settings.permissions.rocket_launch",
     "not permitted"),  # the typed model knows the kinds
    ({"caps": {"emails": 3}}, "settings.caps.emails", "not permitted"),
])
def test_settings_beyond_the_operators_policy_are_refused(client_and_token, operator, settings,
                                                          field, says) -> None:
    client, auth = client_and_token
    created = client.post("/api/projects", headers=auth, json={"name": "A", "settings": settings})
    assert created.status_code == 422
    assert says in created.json["error"]["details"]["fields"][field]
    pid = client.post("/api/projects", headers=auth, json={"name": "B"}).json["id"]
    patched = client.patch(f"/api/projects/{pid}", headers=auth, json={"settings": settings})
    assert patched.status_code == 422
    assert field in patched.json["error"]["details"]["fields"]
    assert field in patched.json["error"]["message"]
    assert client.get(f"/api/projects/{pid}", headers=auth).json["settings"] == {}


def test_settings_within_the_operators_policy_are_kept(client_and_token, operator) -> None:
    client, auth = client_and_token
    settings = {"permissions": {"email": True, "github_dispatch": False},
                "caps": {"email_per_day": 100, "deploy_hook_per_day": 0}}
    created = client.post("/api/projects", headers=auth, json={"name": "A", "settings": settings})
    assert created.status_code == 201
    assert created.json["settings"] == settings


def _confirmations(pid: str) -> list[tuple[str, str]]:
    return [(r["to_addr"], r["body"]) for r in pg.fetch_dicts(
        "SELECT to_addr, body FROM email_jobs WHERE project_id = %s AND kind = 'confirm' "
        "ORDER BY created_at", (pid,))]


def _link(body: str) -> str:
    """The mailed link's path and query, to open with the test client."""
    url = urlsplit(next(w for w in body.split() if "/api/contact/confirm?" in w))
    return f"{url.path}?{url.query}"


@pytest.fixture
def public_url(settings_env) -> None:
    settings_env(SWITCHYARD_PUBLIC_URL="https://switchyard.example")


def test_a_contact_address_gets_drips_only_once_its_reader_confirms_it(client_and_token,
                                                                        public_url):
    # Given a project created with a contact address (issue 23.6: digests go on the operator's
    # mail credentials, so an address typed by a tenant is mailed only a confirmation link)
    client, auth = client_and_token
    pid = client.post("/api/projects", headers={**auth, "Host": "evil.example"},
                      json={"name": "Acme", "settings": {"contact_email": "f@acme.test"}}
                      ).json["id"]
    [(to, body)] = _confirmations(pid)
    # The link names the operator's public URL, whatever Host the caller sent
    assert to == "f@acme.test" and "https://switchyard.example/api/contact/confirm?" in body
    assert "evil.example" not in body
    link = _link(body)

    # Then the daily drips skip it until the address is confirmed; opening the link (a mail
    # scanner fetching it) shows a page and confirms nothing
    assert pid not in {str(r["id"]) for r in pg.fetch_dicts(mail.DIGEST_SOURCES)}
    page = client.get(link)
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert '<form method="post">' in page.get_data(as_text=True)
    assert pid not in {str(r["id"]) for r in pg.fetch_dicts(mail.DIGEST_SOURCES)}
    # And a link that is not whole, or names another project, confirms nothing
    bad_link = link[:-1] + ("0" if link[-1] != "0" else "1")
    assert client.get(bad_link).status_code == 404
    bad = client.post(bad_link)
    assert bad.status_code == 404 and bad.json["error"]["code"] == "not_found"
    other = client.post("/api/projects", headers=auth, json={"name": "Other"}).json["id"]
    assert client.post(link.replace(pid, other)).status_code == 404
    assert pid not in {str(r["id"]) for r in pg.fetch_dicts(mail.DIGEST_SOURCES)}

    # When the reader presses the page's button (no token: the link is the credential)
    opened = client.post(link)
    assert opened.status_code == 200, opened.json
    assert opened.json == {"project_id": pid, "contact_email": "f@acme.test", "confirmed": True}
    assert pid in {str(r["id"]) for r in pg.fetch_dicts(mail.DIGEST_SOURCES)}
    # And a client cannot mark an address confirmed itself
    forged = client.patch(f"/api/projects/{pid}", headers=auth,
                          json={"settings": {"contact_email_confirmed": "x@evil.test"}})
    assert forged.status_code == 422

    # When the owner changes the address, it is unconfirmed and the new one gets its link;
    # the old link no longer works, and setting the address again the same day mails nothing
    client.patch(f"/api/projects/{pid}", headers=auth,
                 json={"settings": {"contact_email": "g@acme.test"}})
    assert pid not in {str(r["id"]) for r in pg.fetch_dicts(mail.DIGEST_SOURCES)}
    assert client.post(link).status_code == 404
    client.patch(f"/api/projects/{pid}", headers=auth,
                 json={"settings": {"contact_email": "h@acme.test"}})
    client.patch(f"/api/projects/{pid}", headers=auth,
                 json={"settings": {"contact_email": "g@acme.test"}})
    assert [to for to, _ in _confirmations(pid)] == ["f@acme.test", "g@acme.test", "h@acme.test"]


def test_without_a_public_url_no_link_is_mailed(client_and_token) -> None:
    client, auth = client_and_token
    pid = client.post("/api/projects", headers=auth, json={
        "name": "Acme", "settings": {"contact_email": "f@acme.test"}}).json["id"]
    assert _confirmations(pid) == []
