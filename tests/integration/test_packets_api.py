"""The packet and what it cost, over the HTTP API: a real packet job (the scripted model, a real
worker) lists its packet with each proposed action's approval state, and its job's LLM tokens
and dollars per step and in total."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

import pytest
from flask import Flask

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.conftest import wait_until

HOOK = "https://hooks.example.test/deploy/site"


class Client:
    def __init__(self, app: Flask, token: str):
        self.app, self.token = app, token

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        with self.app.test_client() as c:
            r = c.open(path, method=method, headers={"Authorization": f"Bearer {self.token}"},
                       data=None if body is None else json.dumps(body),
                       content_type="application/json")
            return r.status_code, r.get_json()


def owner_with_project(name: str) -> tuple[str, str, str]:
    with session_scope(session_factory()) as s:
        owner, token = create_token(s, name)
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name, goal, settings) VALUES "
               "(%s, %s, 'Tidewater', 'tide-aware scheduling for harbour masters', %s::jsonb)",
               (project, owner, json.dumps({"contact_email": "founder@example.test",
                                            "deploy_hook_url": HOOK})))
    return str(owner), token, project


@pytest.fixture
def app(db: None) -> Flask:
    return create_app()


def generate_packet(project: str) -> str:
    job_id = str(enqueue(EnqueueRequest(project, "phase0.generate_packet", {"phase": 0})).job_id)
    wait_until(lambda: pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s", (job_id,))
               in ("completed", "failed"), 30, what="the packet job")
    assert pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s", (job_id,)) == \
        "completed"
    return job_id


def test_a_projects_packets_come_with_each_actions_approval_state(worker, app):
    _, token, project = owner_with_project("ada")
    ada = Client(app, token)
    job_id = generate_packet(project)

    code, body = ada.call("GET", f"/api/projects/{project}/packets")

    assert code == 200, body
    (packet,) = body["items"]
    stored = pg.fetch_one_dict("SELECT id, content FROM packets WHERE job_id = %s", (job_id,))
    assert stored is not None
    content = stored["content"]
    assert packet["id"] == str(stored["id"]) and packet["job_id"] == job_id
    assert packet["phase"] == 0 and packet["created_at"]
    assert (packet["title"], packet["summary"], packet["insights"]) == (
        content["title"], content["summary"], content["insights"])
    assert [(a["type"], a["title"], a["args"]) for a in packet["actions"]] == [
        (a["type"], a["title"], a.get("args", {})) for a in content["actions"]]
    inbox = {a["id"]: a for a in ada.call("GET", f"/api/inbox?project_id={project}")[1]["items"]}
    assert inbox and {a["approval"]["id"] for a in packet["actions"]} == set(inbox)
    for action in packet["actions"]:
        approval = action["approval"]
        assert approval["status"] == "pending" and approval["execution_status"] == "idle"
        assert inbox[approval["id"]]["action_args"] == action["args"]

    # Deciding an action shows in the packet
    deploy = next(a for a in packet["actions"] if a["type"] == "deploy_hook")
    code, _ = ada.call("POST", f"/api/inbox/{deploy['approval']['id']}/decision",
                       {"decision": "rejected", "version": deploy["approval"]["version"]})
    assert code == 200
    again = ada.call("GET", f"/api/projects/{project}/packets")[1]["items"][0]
    states = {a["approval"]["id"]: a["approval"]["status"] for a in again["actions"]}
    assert states[deploy["approval"]["id"]] == "rejected"


def test_a_jobs_llm_tokens_and_cost_per_step_and_in_total(worker, app):
    _, token, project = owner_with_project("ada")
    ada = Client(app, token)
    job_id = generate_packet(project)
    # a second call priced by hand, so the sums are not all zero (the scripted model is free)
    research_seq = pg.fetch_value("SELECT seq FROM job_steps WHERE job_id = %s "
                                  "AND name = 'research'", (job_id,))
    pg.execute("INSERT INTO llm_usage (project_id, job_id, step_seq, provider, model, "
               "input_tokens, output_tokens, cost_usd) VALUES "
               "(%s, %s, %s, 'anthropic', 'claude-sonnet-4', 1000, 200, 0.006)",
               (project, job_id, research_seq))

    code, body = ada.call("GET", f"/api/jobs/{job_id}/llm-usage")

    assert code == 200, body
    rows = pg.fetch_dicts("SELECT step_seq, input_tokens, output_tokens, cost_usd "
                          "FROM llm_usage WHERE job_id = %s", (job_id,))
    assert len(rows) == 3 and all(r["step_seq"] is not None for r in rows)
    total = body["total"]
    assert total["calls"] == 3
    assert total["input_tokens"] == sum(r["input_tokens"] for r in rows)
    assert total["output_tokens"] == sum(r["output_tokens"] for r in rows)
    assert Decimal(str(total["cost_usd"])) == sum(r["cost_usd"] for r in rows)
    by_name = {s["name"]: s for s in body["steps"]}
    assert set(by_name) == {"research", "synthesize"}
    assert by_name["research"]["calls"] == 2 and by_name["research"]["seq"] == research_seq
    assert by_name["research"]["cost_usd"] == pytest.approx(0.006)
    assert by_name["synthesize"]["calls"] == 1 and by_name["synthesize"]["input_tokens"] > 0


@pytest.mark.parametrize("path", ["/api/projects/{pid}/packets", "/api/jobs/{jid}/llm-usage"])
def test_another_owners_packets_and_usage_are_a_404(app, path):
    _, _, project = owner_with_project("ada")
    _, bob_token, _ = owner_with_project("bob")
    job_id = str(enqueue(EnqueueRequest(project, "system.canary", {}), publish=False).job_id)
    code, body = Client(app, bob_token).call(
        "GET", path.replace("{pid}", project).replace("{jid}", job_id))
    assert code == 404 and body["error"]["code"] == "not_found"
