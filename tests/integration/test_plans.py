"""The planner over HTTP with a real worker: a goal → a plan from the model (the real anthropic
SDK against a local Messages API, corrected when invalid) → approval in the inbox (edits
before it are new versions) → run as a DAG of jobs by role → re-planned after a task fails
for good. Another owner's plans are not found."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tasks.engine import pg
from tasks.planner import store
from tasks.services.llm import reset_client
from tasks.settings import get_settings
from tests.conftest import wait_until
from tests.integration.test_api_contract import Caller, alice, bob, client  # noqa: F401
from tests.support.fake_anthropic import FakeAnthropic, anthropic_model, fake_anthropic  # noqa: F401

# ruff: noqa: F811 - fixtures are imported, then requested by name

GOAL = "Launch a waitlist page for a note-taking app"
VALID = {"tasks": [
    {"id": "research", "description": "Find three competitors", "assigned_to": "analyst",
     "depends_on": []},
    {"id": "copy", "description": "Write the page copy", "assigned_to": "writer",
     "depends_on": ["research"]},
]}
INVALID = {"tasks": [
    {"id": "a", "description": "One", "assigned_to": "Analyst", "depends_on": ["b"]},
    {"id": "b", "description": "Two", "assigned_to": "writer", "depends_on": ["a", "zz"]},
]}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Settings the in-process worker reads too: set, then read again."""
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()
    reset_client()


@pytest.fixture
def model(anthropic_model: FakeAnthropic) -> FakeAnthropic:
    return anthropic_model


def text(value: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value if isinstance(value, str) else json.dumps(value)}]


def create(caller: Caller, **fields: Any) -> dict[str, Any]:
    r = caller.post(f"/api/projects/{caller.project}/plans",
                    {"name": "waitlist", "goal": GOAL, **fields})
    assert r.status_code == 202, r.get_json()
    return r.get_json()


def plan(caller: Caller, plan_id: str) -> dict[str, Any]:
    r = caller.get(f"/api/plans/{plan_id}")
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def until_status(caller: Caller, plan_id: str, *statuses: str, timeout: float = 60) -> dict:
    def reached() -> dict | None:
        p = plan(caller, plan_id)
        return p if p["status"] in statuses else None
    return wait_until(reached, timeout=timeout, what=f"plan {statuses}")  # type: ignore[return-value]


def decide(caller: Caller, approval_id: str, decision: str) -> None:
    version = pg.fetch_value("SELECT version FROM approvals WHERE id = %s", (approval_id,))
    r = caller.post(f"/api/inbox/{approval_id}/decision",
                    {"decision": decision, "version": version})
    assert r.status_code == 200, r.get_json()


def job_status(job_id: str) -> str:
    return pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s", (job_id,))


def test_an_invalid_plan_is_asked_again_with_its_problems_and_the_second_is_stored(
        alice: Caller, worker: object, model: FakeAnthropic) -> None:
    answers = iter([INVALID, VALID])
    model.script = lambda body: text(next(answers))
    started = create(alice)
    p = until_status(alice, started["plan_id"], "awaiting_approval")
    assert model.count == 2
    second_ask = model.received[1].body["messages"]
    correction = second_ask[-1]["content"]
    for problem in ("'Analyst' is not a role", "no task has the id 'zz'", "cycle a → b → a"):
        assert problem in correction, correction
    assert [(t["id"], t["assigned_to"], t["depends_on"], t["status"]) for t in p["tasks"]] == [
        ("research", "analyst", [], "pending"), ("copy", "writer", ["research"], "pending")]
    assert p["version"] == 1 and p["versions"][0]["origin"] == "generated"
    # the inbox shows the plan: its tasks are the approval's arguments
    pending = alice.get(f"/api/inbox?project_id={alice.project}").get_json()["items"]
    assert [a["action_type"] for a in pending] == ["plan"]
    assert pending[0]["action_args"]["tasks"][1]["depends_on"] == ["research"]
    assert pending[0]["id"] == p["approval_id"]
    # rejected: the plan ends there, nothing runs
    decide(alice, p["approval_id"], "rejected")
    until_status(alice, started["plan_id"], "rejected")
    wait_until(lambda: job_status(started["job_id"]) == "completed", timeout=30)
    assert pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE parent_job_id = %s",
                          (started["job_id"],)) == 0


def test_three_invalid_plans_fail_the_plan_saying_what_was_wrong(
        alice: Caller, worker: object, model: FakeAnthropic) -> None:
    model.script = lambda body: text("Here is my plan: " + json.dumps(INVALID))
    started = create(alice)
    p = until_status(alice, started["plan_id"], "failed")
    assert model.count == 3
    assert "no valid plan in 3 asks" in p["error"] and "'zz'" in p["error"], p["error"]
    assert p["tasks"] == [] and p["version"] == 0
    wait_until(lambda: job_status(started["job_id"]) == "failed", timeout=30)


def test_an_approved_plan_runs_each_task_with_its_prerequisites_outputs(
        alice: Caller, worker: object) -> None:
    started = create(alice)  # the scripted provider: research → draft → review
    p = until_status(alice, started["plan_id"], "awaiting_approval")
    assert [t["id"] for t in p["tasks"]] == ["research", "draft", "review"]
    decide(alice, p["approval_id"], "approved")
    done = until_status(alice, started["plan_id"], "completed", timeout=90)
    assert {t["status"] for t in done["tasks"]} == {"completed"}
    by_id = {t["id"]: t for t in done["tasks"]}
    assert by_id["research"]["output"]["text"].startswith("analyst finished research")
    # the review's job was told the goal, its task and what research and draft produced
    review = pg.fetch_one_dict("SELECT job_type, payload FROM agent_jobs WHERE id = %s",
                               (by_id["review"]["job_id"],))
    assert review is not None and review["job_type"] == "agent.task"
    prompt = review["payload"]["prompt"]
    assert GOAL in prompt and "Your task (review)" in prompt
    assert by_id["research"]["output"]["text"] in prompt
    assert by_id["draft"]["output"]["text"] in prompt
    assert review["payload"]["role"] == "reviewer"


def test_an_edit_before_approval_is_a_new_version_bound_to_a_new_approval(
        alice: Caller, worker: object) -> None:
    started = create(alice)
    first = until_status(alice, started["plan_id"], "awaiting_approval")
    url = f"/api/plans/{started['plan_id']}"
    # every problem at once, nothing written
    bad = alice.client.put(url, json={"tasks": [
        {"id": "x", "description": "one", "assigned_to": "writer", "depends_on": ["x", "y"]},
        {"id": "x", "description": "two", "assigned_to": "writer"}]}, headers=alice.headers())
    assert bad.status_code == 422, bad.get_json()
    problems = "\n".join(bad.get_json()["error"]["details"]["problems"])
    for expected in ("depends on itself", "'y'", "also the id of"):
        assert expected in problems, problems
    assert pg.fetch_value("SELECT count(*) FROM plan_versions") == 1
    edited = alice.client.put(url, json={"tasks": [
        {"id": "outline", "description": "Outline the page", "assigned_to": "writer"},
        {"id": "polish", "description": "Polish the outline", "assigned_to": "editor",
         "depends_on": ["outline"]}]}, headers=alice.headers())
    assert edited.status_code == 200, edited.get_json()
    second = edited.get_json()
    assert second["version"] == 2 and [v["origin"] for v in second["versions"]] == [
        "generated", "edited"]
    assert second["approval_id"] != first["approval_id"]
    old = pg.fetch_value("SELECT status FROM approvals WHERE id = %s", (first["approval_id"],))
    assert old == "expired"
    # the superseded approval cannot be approved any more
    stale = pg.fetch_value("SELECT version FROM approvals WHERE id = %s",
                           (first["approval_id"],))
    r = alice.post(f"/api/inbox/{first['approval_id']}/decision",
                   {"decision": "approved", "version": stale})
    assert r.status_code == 409
    decide(alice, second["approval_id"], "approved")
    done = until_status(alice, started["plan_id"], "completed", timeout=90)
    assert [(t["id"], t["status"]) for t in done["tasks"]] == [
        ("outline", "completed"), ("polish", "completed")]
    # once running, a plan is no longer editable
    late = alice.client.put(url, json={"tasks": [
        {"id": "x", "description": "late", "assigned_to": "writer"}]}, headers=alice.headers())
    assert late.status_code == 409, late.get_json()


def test_a_task_that_fails_for_good_is_replanned_and_the_run_goes_on(
        alice: Caller, worker: object, env: pytest.MonkeyPatch) -> None:
    env.setenv("SWITCHYARD_PLAN_ROLES", json.dumps({"writer": "test.refuse"}))
    get_settings.cache_clear()
    started = create(alice, auto_approve=True)
    done = until_status(alice, started["plan_id"], "completed", "failed", timeout=120)
    assert done["status"] == "completed", done
    assert done["version"] == 2 and done["revisions"] == 1
    assert done["versions"][1]["origin"] == "revised"
    assert "task 'draft' failed" in done["versions"][1]["reason"]
    by_id = {t["id"]: t for t in done["tasks"]}
    assert set(by_id) == {"research", "draft-retry", "review"}
    assert {t["status"] for t in done["tasks"]} == {"completed"}
    # the completed task was kept, not run again
    first = {t["task_key"]: t for t in pg.fetch_dicts(
        "SELECT task_key, status, job_id FROM plan_tasks WHERE version = 1")}
    assert by_id["research"]["job_id"] == str(first["research"]["job_id"])
    assert first["draft"]["status"] == "failed" and first["review"]["status"] == "blocked"
    assert pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE job_type = 'agent.task' "
                          "AND payload->>'role' = 'analyst'") == 1
    assert by_id["review"]["depends_on"] == ["draft-retry", "research"]


def test_out_of_revisions_the_plan_fails_and_says_why(
        alice: Caller, worker: object, env: pytest.MonkeyPatch) -> None:
    env.setenv("SWITCHYARD_PLAN_ROLES", json.dumps({"writer": "test.refuse"}))
    env.setenv("SWITCHYARD_PLAN_MAX_REVISIONS", "0")
    get_settings.cache_clear()
    started = create(alice, auto_approve=True)
    done = until_status(alice, started["plan_id"], "failed", timeout=90)
    assert "task 'draft' failed" in done["error"] and "no revision left" in done["error"]
    assert "refused on purpose" in done["error"]
    statuses = {t["id"]: t["status"] for t in done["tasks"]}
    assert statuses == {"research": "completed", "draft": "failed", "review": "blocked"}


def test_another_owners_plans_are_not_found_and_bad_input_writes_nothing(
        alice: Caller, bob: Caller) -> None:
    started = create(alice)  # no worker of its own (one left by an earlier test may run it)
    url = f"/api/plans/{started['plan_id']}"
    assert bob.get(url).status_code == 404
    put = bob.client.put(url, json={"tasks": [
        {"id": "x", "description": "mine now", "assigned_to": "writer"}]},
        headers=bob.headers())
    assert put.status_code == 404
    assert bob.post(f"/api/projects/{alice.project}/plans",
                    {"name": "x", "goal": "y"}).status_code == 404
    assert bob.get(f"/api/projects/{alice.project}/plans").status_code == 404
    assert alice.get("/api/plans/not-a-uuid").status_code == 404
    listed = alice.get(f"/api/projects/{alice.project}/plans").get_json()["items"]
    assert [p["id"] for p in listed] == [started["plan_id"]]
    before = pg.fetch_value("SELECT count(*) FROM plans")
    for body in ({"name": "x"}, {"name": "x", "goal": ""}, {"name": "x", "goal": "y",
                                                             "auto_approve": "yes"},
                 {"name": "x", "goal": "y", "repo_url": "ftp://example.com/r.git"}):
        r = alice.post(f"/api/projects/{alice.project}/plans", body)
        assert r.status_code == 422, (body, r.get_json())
    assert pg.fetch_value("SELECT count(*) FROM plans") == before
    # editing a plan that awaits no approval (its planner has not answered) is a conflict
    early = uuid.uuid4()
    store.insert_plan(early, alice.project, name="early", goal="g", repo_url=None,
                      github_repo=None, auto_approve=False, complete_on_merge=False,
                      job_id=uuid.uuid4())
    r = alice.client.put(f"/api/plans/{early}", json={"tasks": [
        {"id": "x", "description": "early", "assigned_to": "writer"}]}, headers=alice.headers())
    assert r.status_code == 409, r.get_json()
    # a plan whose job ended without ending the plan reads as the job's end, listed too
    # (a worker of an earlier test may have claimed the job: its cancel may take a moment)
    assert alice.post(f"/api/jobs/{started['job_id']}/cancel", {}).status_code == 200
    until_status(alice, started["plan_id"], "canceled", timeout=30)
    listed = alice.get(f"/api/projects/{alice.project}/plans").get_json()["items"]
    assert {p["id"]: p["status"] for p in listed}[started["plan_id"]] == "canceled"

def test_the_repositorys_file_tree_reaches_the_planner_and_the_tasks_prompts(
        alice: Caller, worker: object, model: FakeAnthropic, env: pytest.MonkeyPatch,
        tmp_path) -> None:
    from tasks.coding.demo import FILES, ensure_demo_repo

    bare = ensure_demo_repo(tmp_path / "repos")
    env.setenv("SWITCHYARD_LOCAL_REPOS", str((tmp_path / "repos").resolve()))
    get_settings.cache_clear()
    model.script = lambda body: text(VALID if "planner" in body["system"] else "done: ok")
    started = create(alice, repo_url=str(bare), auto_approve=True)
    done = until_status(alice, started["plan_id"], "completed", "failed", timeout=90)
    assert done["status"] == "completed", done
    asked = model.received[0].body["messages"][0]["content"]
    agent = model.received[-1].body["messages"][0]["content"]
    for name in FILES:
        assert name in asked and name in agent, (name, asked)
    # the checkout the listing came from is gone
    assert not any(get_settings().workspaces_dir.glob(f"{started['job_id']}-plan*"))
