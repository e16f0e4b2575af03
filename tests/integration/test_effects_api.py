"""Effects, packets and LLM usage over the HTTP API: validation, ownership, resolution, and the
re-approval of an action whose earlier effect nobody can vouch for.

Effects are written into the ledger directly (the kill -9 that makes one `unknown` for real is
in tests/e2e/test_unknown_effects_e2e.py); everything else goes through Flask's test client.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.services import approvals
from tasks.services.approvals import NewApproval, create_approval
from tasks.settings import get_settings
from tests.integration.jobdb import tuple_row

DEPLOY = {"url": "https://hooks.example.test/deploy/site"}


@dataclass
class Client:
    app: Flask
    token: str
    owner: str
    project: str

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        with self.app.test_client() as c:
            r = c.open(path, method=method, headers={"Authorization": f"Bearer {self.token}"},
                       data=None if body is None else json.dumps(body),
                       content_type="application/json")
            return r.status_code, r.get_json()


def _client(app: Flask, name: str) -> Client:
    with session_scope(session_factory()) as s:
        owner, token = create_token(s, name)
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, %s)",
               (project, owner, f"{name}'s project"))
    return Client(app, token, str(owner), project)


@pytest.fixture
def app(db: None) -> Flask:
    return create_app()


@pytest.fixture
def ada(app: Flask) -> Client:
    return _client(app, "ada")


@pytest.fixture
def bob(app: Flask) -> Client:
    return _client(app, "bob")


def approved(c: Client, args: dict[str, Any] = DEPLOY, *, source: str | None = None) -> str:
    """An approved deploy approval (its execution job is enqueued, never run here)."""
    aid = create_approval(c.project, source, NewApproval("deploy_hook", "Deploy", args),
                          force_new=True)
    approvals.decide(aid, c.owner, "approved", 1)
    return str(aid)


def effect(c: Client, status: str, *, approval_id: str | None = None,
           args: dict[str, Any] = DEPLOY, job_id: str | None = None) -> str:
    """A ledger row in `status`, as a worker would have left it."""
    eid = str(uuid.uuid4())
    pg.execute("INSERT INTO action_executions (id, idempotency_key, project_id, approval_id, "
               "job_id, action_type, args, status, provider_ref, error, completed_at) "
               "VALUES (%s, %s, %s, %s, %s, 'deploy_hook', %s::jsonb, %s, %s, %s, "
               "CASE WHEN %s <> 'intent' THEN now() END)",
               (eid, f"approval:{approval_id or eid}", c.project, approval_id, job_id,
                json.dumps(args), status, "dep_1" if status == "succeeded" else None,
                "the hook cannot be asked" if status == "unknown" else None, status))
    return eid


def pending(c: Client, args: dict[str, Any] = DEPLOY) -> str:
    return str(create_approval(c.project, None, NewApproval("deploy_hook", "Deploy again", args),
                               force_new=True))


# --- GET /api/projects/<pid>/effects --------------------------------------------------------

def test_effects_are_listed_newest_first_with_what_a_person_needs_to_check_them(ada):
    aid = approved(ada)
    older = effect(ada, "succeeded")
    unknown = effect(ada, "unknown", approval_id=aid)

    status, body = ada.call("GET", f"/api/projects/{ada.project}/effects")

    assert status == 200, body
    assert [e["id"] for e in body["items"]] == [unknown, older]
    item = body["items"][0]
    assert item["kind"] == "deploy_hook" and item["status"] == "unknown"
    assert item["key"] == f"approval:{aid}" and item["approval_id"] == aid
    assert item["args"] == DEPLOY and item["error"] == "the hook cannot be asked"
    assert item["created_at"] and item["resolution"] is None
    assert body["items"][1]["provider_ref"] == "dep_1"


def test_the_status_filter_lists_only_that_status_and_refuses_an_unknown_one(ada):
    effect(ada, "succeeded")
    unknown = effect(ada, "unknown")

    status, body = ada.call("GET", f"/api/projects/{ada.project}/effects?status=unknown")
    assert status == 200 and [e["id"] for e in body["items"]] == [unknown]
    status, body = ada.call("GET", f"/api/projects/{ada.project}/effects?status=lost")
    assert status == 422 and body["error"]["details"]["field"] == "status"


def test_arguments_are_redacted_as_the_ledger_redacts_them(ada, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_GITHUB_TOKEN", "ghp-secret-0123456789")
    get_settings.cache_clear()
    try:
        effect(ada, "unknown", args={"url": "https://x.test/?token=ghp-secret-0123456789"})
        status, body = ada.call("GET", f"/api/projects/{ada.project}/effects")
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert status == 200
    assert body["items"][0]["args"] == {"url": "https://x.test/?token=[redacted]"}


@pytest.mark.parametrize("path", [
    pytest.param("/api/projects/{bob}/effects", id="another owner's project"),
    pytest.param("/api/projects/not-a-uuid/effects", id="no uuid"),
    pytest.param(f"/api/projects/{uuid.uuid4()}/effects", id="no such project"),
])
def test_effects_of_a_project_that_is_not_yours_are_a_404(ada, bob, path):
    effect(bob, "unknown")
    status, body = ada.call("GET", path.replace("{bob}", bob.project))
    assert status == 404 and body["error"]["code"] == "not_found"


# --- POST /api/effects/<id>/resolve ---------------------------------------------------------

def test_resolving_an_unknown_effect_records_who_when_and_why_and_tells_the_project(ada):
    aid = approved(ada)
    eid = effect(ada, "unknown", approval_id=aid)
    pg.execute("UPDATE approvals SET execution_status = 'failed' WHERE id = %s", (aid,))
    before = pg.fetch_value("SELECT coalesce(max(id), 0) FROM agent_job_events")

    status, body = ada.call("POST", f"/api/effects/{eid}/resolve",
                            {"outcome": "succeeded", "note": "the site shows the new build"})

    assert status == 200, body
    assert body["id"] == eid and body["status"] == "succeeded"
    resolution = body["resolution"]
    assert resolution["outcome"] == "succeeded" and resolution["by"] == ada.owner
    assert resolution["note"] == "the site shows the new build" and resolution["at"]
    # the action counts as done
    assert pg.fetch_value("SELECT execution_status FROM approvals WHERE id = %s",
                          (aid,)) == "completed"
    # (the approval's own execute job may be run meanwhile by this session's worker)
    events = pg.fetch_dicts("SELECT project_id, type, message, data FROM agent_job_events "
                            "WHERE id > %s AND data ? 'effect_id'", (before,))
    assert len(events) == 1 and str(events[0]["project_id"]) == ada.project
    assert events[0]["data"]["effect_id"] == eid and events[0]["data"]["outcome"] == "succeeded"
    assert "succeeded" in events[0]["message"]


@pytest.mark.parametrize("status", ["succeeded", "failed", "intent"])
def test_only_an_unknown_effect_can_be_resolved(ada, status):
    eid = effect(ada, status)
    code, body = ada.call("POST", f"/api/effects/{eid}/resolve", {"outcome": "failed"})
    assert code == 409, body
    assert body["error"]["code"] == "effect_not_unknown"
    assert status in body["error"]["message"] and "only an unknown" in body["error"]["message"]
    assert pg.fetch_value("SELECT status FROM action_executions WHERE id = %s", (eid,)) == status


@pytest.mark.parametrize("body", [
    pytest.param({}, id="no outcome"),
    pytest.param({"outcome": "unknown"}, id="unknown is no verdict"),
    pytest.param({"outcome": "succeeded", "note": 3}, id="note not a string"),
    pytest.param({"outcome": "succeeded", "note": "x" * 2001}, id="note too long"),
    pytest.param({"outcome": "failed", "by": "someone else"}, id="an unknown field"),
])
def test_a_resolution_that_is_not_valid_is_a_422_and_changes_nothing(ada, body):
    eid = effect(ada, "unknown")
    code, answer = ada.call("POST", f"/api/effects/{eid}/resolve", body)
    assert code == 422, answer
    assert pg.fetch_value("SELECT status FROM action_executions WHERE id = %s",
                          (eid,)) == "unknown"


def test_another_owners_effect_cannot_be_resolved_or_seen(ada, bob):
    theirs = effect(bob, "unknown")
    for path in (f"/api/effects/{theirs}/resolve", f"/api/effects/{uuid.uuid4()}/resolve",
                 "/api/effects/nope/resolve"):
        code, body = ada.call("POST", path, {"outcome": "failed"})
        assert code == 404 and body["error"]["code"] == "not_found", path
    assert pg.fetch_value("SELECT status FROM action_executions WHERE id = %s",
                          (theirs,)) == "unknown"


# --- approving the same action again -----------------------------------------------------------

def test_approving_an_action_again_while_its_effect_is_unknown_is_a_409_that_says_why(ada):
    first = approved(ada)
    eid = effect(ada, "unknown", approval_id=first)
    again = pending(ada)

    code, body = ada.call("POST", f"/api/inbox/{again}/decision",
                          {"decision": "approved", "version": 1})

    assert code == 409, body
    assert body["error"]["code"] == "effect_unknown"
    assert body["error"]["details"]["effect_id"] == eid
    assert "unknown" in body["error"]["message"] and "resolve" in body["error"]["message"]
    row = tuple_row("SELECT status, version FROM approvals WHERE id = %s", (again,))
    assert row == ("pending", 1)
    assert pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE idempotency_key = %s",
                          (f"approval:{again}",)) == 0
    # a different action, and a rejection, are not held up
    other = pending(ada, {"url": "https://hooks.example.test/deploy/other"})
    assert ada.call("POST", f"/api/inbox/{other}/decision",
                    {"decision": "approved", "version": 1})[0] == 200
    assert ada.call("POST", f"/api/inbox/{again}/decision",
                    {"decision": "rejected", "version": 1})[0] == 200


def test_after_the_unknown_effect_is_resolved_failed_the_action_can_be_approved_again(ada):
    first = approved(ada)
    eid = effect(ada, "unknown", approval_id=first)
    again = pending(ada)
    assert ada.call("POST", f"/api/inbox/{again}/decision",
                    {"decision": "approved", "version": 1})[0] == 409

    assert ada.call("POST", f"/api/effects/{eid}/resolve",
                    {"outcome": "failed", "note": "the hook never deployed"})[0] == 200
    code, body = ada.call("POST", f"/api/inbox/{again}/decision",
                          {"decision": "approved", "version": 1})

    assert code == 200, body
    assert body["status"] == "approved" and body["execution_job_id"]
    assert pg.fetch_value("SELECT execution_status FROM approvals WHERE id = %s",
                          (first,)) == "failed"


def test_retrying_an_execution_whose_effect_is_unknown_is_a_409_until_it_is_resolved(ada):
    aid = approved(ada)
    job_id = pg.fetch_value("SELECT execution_job_id FROM approvals WHERE id = %s", (aid,))
    pg.execute("UPDATE agent_jobs SET status = 'failed', completed_at = now() WHERE id = %s",
               (job_id,))
    eid = effect(ada, "unknown", approval_id=aid, job_id=str(job_id))

    code, body = ada.call("POST", f"/api/jobs/{job_id}/retry")
    assert code == 409 and body["error"]["code"] == "effect_unknown", body
    assert body["error"]["details"]["effect_id"] == eid

    assert ada.call("POST", f"/api/effects/{eid}/resolve", {"outcome": "failed"})[0] == 200
    assert ada.call("POST", f"/api/jobs/{job_id}/retry")[0] == 202
