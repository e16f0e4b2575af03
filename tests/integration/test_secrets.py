"""Per-project secrets over HTTP and at rest: sealed, owner-only, never returned or logged."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from flask.testing import FlaskClient

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.services import keystore
from tasks.services.keys import derived_key
from tasks.settings import get_settings
from tests.integration.jobdb import tuples

VALUE = "ghp_projectSecretValue_0123456789"


def _auth(owner: str) -> dict[str, str]:
    with session_scope(session_factory()) as session:
        _, token = create_token(session, owner)
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def client(db) -> FlaskClient:
    return create_app().test_client()


@pytest.fixture
def alice(client: FlaskClient) -> tuple[dict[str, str], str]:
    auth = _auth("alice")
    return auth, client.post("/api/projects", headers=auth, json={"name": "A"}).json["id"]


def test_a_secret_is_set_listed_by_name_and_deleted(client, alice) -> None:
    auth, pid = alice
    assert client.put(f"/api/projects/{pid}/secrets/github_token", headers=auth,
                      json={"value": VALUE}).status_code == 204
    listed = client.get(f"/api/projects/{pid}/secrets", headers=auth)
    assert listed.status_code == 200
    [item] = listed.json["items"]
    assert set(item) == {"name", "created_at", "updated_at"} and item["name"] == "github_token"
    assert VALUE not in listed.get_data(as_text=True)
    assert keystore.read(pid, ["github_token"]) == {"github_token": VALUE}

    # Set again: replaced, not duplicated
    assert client.put(f"/api/projects/{pid}/secrets/github_token", headers=auth,
                      json={"value": "second"}).status_code == 204
    assert keystore.read(pid, ["github_token"]) == {"github_token": "second"}
    assert len(client.get(f"/api/projects/{pid}/secrets", headers=auth).json["items"]) == 1

    assert client.delete(f"/api/projects/{pid}/secrets/github_token",
                         headers=auth).status_code == 204
    assert client.get(f"/api/projects/{pid}/secrets", headers=auth).json["items"] == []
    assert client.delete(f"/api/projects/{pid}/secrets/github_token",
                         headers=auth).status_code == 404


def test_the_value_is_sealed_at_rest_and_never_logged(client, alice, caplog) -> None:
    auth, pid = alice
    caplog.set_level(logging.DEBUG)
    client.put(f"/api/projects/{pid}/secrets/github_token", headers=auth, json={"value": VALUE})

    [(blob, key_id)] = tuples("SELECT ciphertext, key_id FROM project_secrets")
    assert VALUE.encode() not in bytes(blob) and len(key_id) == 12
    assert VALUE not in caplog.text
    events = tuples("SELECT data::text FROM agent_job_events")
    assert not any(VALUE in row[0] for row in events)


def test_another_owner_can_neither_read_set_nor_delete(client, alice) -> None:
    auth, pid = alice
    client.put(f"/api/projects/{pid}/secrets/github_token", headers=auth, json={"value": VALUE})
    mallory = _auth("mallory")
    assert client.get(f"/api/projects/{pid}/secrets", headers=mallory).status_code == 404
    assert client.put(f"/api/projects/{pid}/secrets/github_token", headers=mallory,
                      json={"value": "stolen"}).status_code == 404
    assert client.delete(f"/api/projects/{pid}/secrets/github_token",
                         headers=mallory).status_code == 404
    assert keystore.read(pid, ["github_token"]) == {"github_token": VALUE}


@pytest.mark.parametrize(("name", "body", "field"), [
    ("Github-Token", {"value": "x"}, "name"),
    ("x" * 65, {"value": "x"}, "name"),
    ("github_token", {"value": ""}, "value"),
    ("github_token", {"value": 42}, "value"),
    ("github_token", {"value": "a\x00b"}, "value"),
    ("github_token", {"value": "x" * (keystore.VALUE_MAX + 1)}, "value"),
    ("github_token", {}, "value"),
    ("github_token", {"value": "x", "note": "y"}, "note"),
])
def test_bad_names_and_values_are_refused_and_nothing_is_written(client, alice, name, body,
                                                                 field) -> None:
    auth, pid = alice
    answer = client.put(f"/api/projects/{pid}/secrets/{name}", headers=auth, json=body)
    assert answer.status_code == 422
    assert field in answer.json["error"]["details"]["fields"]
    assert tuples("SELECT count(*) FROM project_secrets") == [(0,)]


def test_a_sealed_value_opens_only_for_its_project_and_name_under_its_key() -> None:
    key = derived_key(get_settings(), keystore.PURPOSE)
    blob = keystore.seal(key, "p1", "github_token", VALUE)
    assert keystore.unseal(key, "p1", "github_token", blob) == VALUE
    for project, name in (("p2", "github_token"), ("p1", "resend_api_key")):
        with pytest.raises(keystore.SecretUnreadable):
            keystore.unseal(key, project, name, blob)
    other = derived_key(replace(get_settings(), secret_key="another-master-key"),
                        keystore.PURPOSE)
    with pytest.raises(keystore.SecretUnreadable) as refused:
        keystore.unseal(other, "p1", "github_token", blob)
    assert VALUE not in str(refused.value) and "SWITCHYARD_SECRET_KEY" in str(refused.value)
    # One master secret, independent keys per use: the cookie signer's is not this one
    assert derived_key(get_settings(), "cookies/v1") != key


def test_a_project_keeps_a_bounded_number_of_secrets(client, alice, monkeypatch) -> None:
    auth, pid = alice
    monkeypatch.setattr(keystore, "MAX_PER_PROJECT", 3)
    for i in range(3):
        assert client.put(f"/api/projects/{pid}/secrets/s{i}", headers=auth,
                          json={"value": "v"}).status_code == 204
    refused = client.put(f"/api/projects/{pid}/secrets/s3", headers=auth, json={"value": "v"})
    assert refused.status_code == 409 and refused.json["error"]["code"] == "too_many_secrets"
    # replacing one of the three is fine; the fourth was never written
    assert client.put(f"/api/projects/{pid}/secrets/s0", headers=auth,
                      json={"value": "w"}).status_code == 204
    assert [i["name"] for i in client.get(f"/api/projects/{pid}/secrets",
                                          headers=auth).json["items"]] == ["s0", "s1", "s2"]


def test_a_trailing_newline_is_no_secret_name(client, alice) -> None:
    auth, pid = alice
    answer = client.put(f"/api/projects/{pid}/secrets/github_token%0A", headers=auth,
                        json={"value": "v"})
    assert answer.status_code == 422
