"""Project settings over HTTP: set at creation, merged by PATCH, validated strictly."""

from __future__ import annotations

import pytest

from app.db import session_factory
from app.tokens import create_token
from app.web import create_app
from models.db import session_scope


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
    from tasks import pg

    client, auth = client_and_token
    pid = client.post("/api/projects", headers=auth, json={"name": "Acme"}).json["id"]
    answer = client.post(f"/api/projects/{pid}/jobs", headers=auth,
                         json={"job_type": job_type, "payload": {}})
    assert answer.status_code == 422
    assert answer.json["error"]["code"] == "unknown_job_type"
    assert "internal" in answer.json["error"]["message"]
    assert pg.fetch_one("SELECT count(*) FROM agent_jobs")[0] == 0
