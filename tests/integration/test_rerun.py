"""POST /api/jobs/<jid>/rerun (issue 27): a new job whose steps before `from_step` are copied
from the original's record and replayed, not run; from `from_step` on it runs, with the
original payload or an edited one; an effect is never performed twice."""

# ruff: noqa: F811 - the fakes' fixtures are imported, then requested by name

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from tasks.engine.registry import JobType, register
from tasks.services.effects import ledger
from tests.integration import test_api_contract as contract
from tests.integration.jobdb import new_job, tuple_row, tuples, wait_for
from tests.integration.test_api_contract import assert_error, counts
from tests.integration.test_effects import Fakes, fakes  # noqa: F401
from tests.support.fake_providers import fake_providers, fake_smtp  # noqa: F401

client, alice, bob = contract.client, contract.alice, contract.bob


def attempts_by_step(job_id: str) -> dict[str, int]:
    """How many times each step ran in this job (a copied step: 0)."""
    return dict(tuples("SELECT name, attempts FROM job_steps WHERE job_id = %s ORDER BY seq",
                       (job_id,)))


def took(job_id: str) -> float:
    return float(tuple_row("SELECT extract(epoch FROM completed_at - started_at) FROM "
                           "agent_jobs WHERE id = %s", (job_id,))[0])


def test_a_rerun_replays_the_steps_before_and_runs_from_the_step(alice, worker):
    # Given a finished canary whose 3 steps took a second each
    original = alice.job(payload={"steps": 3, "step_seconds": 1})
    assert wait_for(original, timeout=30)["status"] == "completed"
    assert took(original) >= 3

    # When it is rerun from its third step
    r = alice.post(f"/api/jobs/{original}/rerun", {"from_step": "step-3"})
    assert r.status_code == 202, r.get_json()
    body = r.get_json()
    assert (body["rerun_of"], body["copied_steps"]) == (original, 2)
    rerun = body["job_id"]
    row = wait_for(rerun, timeout=30)

    # Then steps 1 and 2 were replayed from the copy, not run: only step 3's second passed
    assert row["status"] == "completed" and row["result"] == {"steps": 3, "attempt": 1}
    assert attempts_by_step(rerun) == {"step-1": 0, "step-2": 0, "step-3": 1}
    assert took(rerun) < 2.5
    assert tuples("SELECT output FROM job_steps WHERE job_id = %s ORDER BY seq", (rerun,)) == [
        ({"n": 1},), ({"n": 2},), ({"n": 3},)]
    # And the new job says what it reruns; the original is unchanged
    detail = alice.get(f"/api/jobs/{rerun}").get_json()
    assert detail["rerun_of"] == original and detail["job_type"] == "system.canary"
    assert alice.get(f"/api/jobs/{original}").get_json()["rerun_of"] is None
    assert attempts_by_step(original) == {"step-1": 1, "step-2": 1, "step-3": 1}


def test_a_failed_job_reruns_from_its_failed_step_with_an_edited_payload(alice, worker):
    # Given a canary that failed at its last step (it fails its first 9 attempts; 1 allowed)
    failed = alice.job(payload={"steps": 3, "fail_first_attempts": 9}, max_attempts=1)
    assert wait_for(failed, timeout=30)["status"] == "failed"

    # When it is rerun from that step with the input fixed (and two more steps)
    r = alice.post(f"/api/jobs/{failed}/rerun",
                   {"from_step": "step-3", "payload": {"steps": 5}})
    assert r.status_code == 202, r.get_json()
    row = wait_for(r.get_json()["job_id"], timeout=30)

    # Then it completes: the two steps that had completed are not run again
    assert row["status"] == "completed" and row["result"]["steps"] == 5
    assert (row["payload"]["steps"], row["payload"]["fail_first_attempts"]) == (5, 0)
    assert attempts_by_step(r.get_json()["job_id"]) == {
        "step-1": 0, "step-2": 0, "step-3": 1, "step-4": 1, "step-5": 1}


def test_what_cannot_be_rerun_is_refused_in_words_and_writes_nothing(alice, bob, worker):
    done = alice.job(payload={"steps": 2})
    wait_for(done, timeout=30)
    failed = alice.job(payload={"steps": 3, "fail_first_attempts": 9}, max_attempts=1)
    wait_for(failed, timeout=30)
    waiting = alice.job(payload={"steps": 1}, run_after="2999-01-01T00:00:00Z")
    before = counts()

    cases = [
        (alice, done, {"from_step": "step-9"}, 422, "unknown_step", "step-9"),
        (alice, failed, {"from_step": "step-3", "payload": {"steps": "many"}}, 422,
         "invalid_payload", "steps"),
        (alice, waiting, {"from_step": "step-1"}, 409, "not_finished", "queued"),
        (alice, done, {}, 422, "validation_error", "from_step"),
        (bob, done, {"from_step": "step-1"}, 404, "not_found", "job"),
    ]
    for who, job_id, body, status, code, word in cases:
        assert_error(who.post(f"/api/jobs/{job_id}/rerun", body), status, code, word)
    assert counts() == before


def test_a_rerun_asked_again_with_its_key_answers_the_first(alice, worker):
    done = alice.job(payload={"steps": 2})
    wait_for(done, timeout=30)
    body = {"from_step": "step-2", "idempotency_key": "retry-safe"}
    first = alice.post(f"/api/jobs/{done}/rerun", body)
    again = alice.post(f"/api/jobs/{done}/rerun", body)
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.get_json()["job_id"] == first.get_json()["job_id"]
    # the same answer, all of it: the steps the first one copied too
    assert again.get_json()["copied_steps"] == first.get_json()["copied_steps"] == 1
    assert tuples("SELECT count(*) FROM agent_jobs WHERE rerun_of = %s", (done,)) == [(1,)]
    other = alice.post(f"/api/jobs/{done}/rerun", {"from_step": "step-2"})
    assert other.status_code == 202 and other.get_json()["job_id"] != first.get_json()["job_id"]
    # Asked again once the original is no longer finished (retried): still the first answer
    from tasks.engine import pg

    pg.execute("UPDATE agent_jobs SET status = 'queued', run_after = %s WHERE id = %s",
               ("2099-01-01T00:00:00+00:00", done))
    late = alice.post(f"/api/jobs/{done}/rerun", body)
    assert late.status_code == 200 and late.get_json()["job_id"] == first.get_json()["job_id"]
    assert late.get_json()["copied_steps"] == 1


def test_a_step_after_an_unfinished_one_cannot_be_the_start(alice, worker):
    # A step that failed cannot be skipped: the rerun must start at it
    failed = alice.job(payload={"steps": 3, "fail_first_attempts": 9}, max_attempts=1)
    wait_for(failed, timeout=30)
    from tasks.engine import pg

    pg.execute("UPDATE job_steps SET status = 'failed' WHERE job_id = %s AND seq = 2", (failed,))
    assert_error(alice.post(f"/api/jobs/{failed}/rerun", {"from_step": "step-3"}), 409,
                 "step_not_completed", "step-2")


# --- an effect is never performed twice ------------------------------------------------

class DeployPayload(BaseModel):
    approval: str
    url: str


def deploys(ctx, p: DeployPayload) -> dict[str, Any]:
    """Like approval.execute: an effect keyed by its approval, between two plain steps."""
    ctx.step("prepare", lambda: {"ref": "main"})
    outcome = ctx.step("deploy", lambda: vars(ledger.perform(
        project_id=ctx.project_id, action_type="deploy_hook",
        args={"url": p.url, "payload": {"ref": "main"}},
        idempotency_key=f"approval:{p.approval}", job_id=str(ctx.job_id))))
    ctx.step("announce", lambda: "deployed")
    return {"status": outcome["status"], "replayed": outcome["replayed"]}


register(JobType("test.deploys", DeployPayload, deploys, max_attempts=1))


@pytest.mark.usefixtures("worker")
def test_a_rerun_through_an_effect_step_gets_the_ledgers_outcome_not_a_second_send(
        alice, fakes: Fakes):
    # Given a job that deployed once through the ledger
    url = f"{fakes.http.url}/deploy/site"
    original = new_job(alice.project, "test.deploys", {"approval": "a-1", "url": url})
    assert wait_for(original, timeout=30)["result"] == {"status": "succeeded",
                                                        "replayed": False}
    assert len(fakes.http.posts("/deploy/site")) == 1

    # When it is rerun from the deploy step (the engine's own call: the type is internal)
    from tasks.engine.rerun import rerun

    again = rerun(original, "deploy", public=False)
    row = wait_for(again.job_id, timeout=30)

    # Then the deploy step ran again, and the ledger answered with the recorded outcome
    assert row["status"] == "completed"
    assert row["result"] == {"status": "succeeded", "replayed": True}
    assert len(fakes.http.posts("/deploy/site")) == 1, "the hook received a second deploy"
    assert attempts_by_step(str(again.job_id)) == {"prepare": 0, "deploy": 1, "announce": 1}
    assert tuples("SELECT count(*) FROM action_executions WHERE project_id = %s",
                  (alice.project,)) == [(1,)]


def test_a_rerun_past_a_wait_for_children_reads_the_originals_children(alice, worker):
    # Given a finished canary that spawned two children after its first step and waited
    original = alice.job(payload={"steps": 3, "children": 2})
    assert wait_for(original, timeout=60)["status"] == "completed"
    kids = tuples("SELECT id FROM agent_jobs WHERE parent_job_id = %s", (original,))
    assert len(kids) == 2
    # When it is rerun from its last step, past the spawns and the wait
    r = alice.post(f"/api/jobs/{original}/rerun", {"from_step": "step-3"})
    assert r.status_code == 202, r.get_json()
    row = wait_for(r.get_json()["job_id"], timeout=60)
    # Then the wait reads the original's children (their ids are in the copied spawns): no
    # "are not children of this job", and nothing is spawned again
    assert row["status"] == "completed", row["last_error"]
    assert tuples("SELECT count(*) FROM agent_jobs WHERE parent_job_id = %s",
                  (r.get_json()["job_id"],)) == [(0,)]


def test_a_workflow_run_is_not_rerun_and_says_what_to_do_instead(alice, worker):
    wid = alice.post(f"/api/projects/{alice.project}/workflows", {
        "name": "wf", "steps": [{"name": "a", "job_type": "system.canary"}]}).get_json()["id"]
    run = alice.post(f"/api/workflows/{wid}/runs", {"inputs": {}}).get_json()["job_id"]
    assert wait_for(run, timeout=60)["status"] == "completed"
    before = counts()
    # By its workflow step's name, or by an engine step's: the same refusal, in words
    for step in ("a", "run:resolve:a"):
        error = assert_error(alice.post(f"/api/jobs/{run}/rerun", {"from_step": step}), 422,
                             "not_rerunnable", "workflow")
        assert "/runs" in error["message"]
    assert counts() == before
