"""Workflow runs through a real worker: parallel branches, templates, skips, stop vs
continue, and approval gates held until decided and bound to the resolved payload."""

from __future__ import annotations

from typing import Any

import pytest

from tasks.engine import pg
from tests.conftest import wait_until
from tests.integration.jobdb import tuple_row, tuples
from tests.integration.test_api_contract import Caller, alice, bob, client  # noqa: F401

pytestmark = pytest.mark.usefixtures("worker")

# A canary that fails every attempt: with its 5 attempts and short backoff, it fails for good.
FAILING = {"steps": 1, "fail_first_attempts": 100}


def save(caller: Caller, steps: list[dict[str, Any]], name: str = "wf") -> str:
    r = caller.post(f"/api/projects/{caller.project}/workflows", {"name": name, "steps": steps})
    assert r.status_code in (200, 201), r.get_json()
    return r.get_json()["id"]


def start(caller: Caller, wid: str, inputs: dict[str, Any] | None = None, **extra: Any) -> str:
    r = caller.post(f"/api/workflows/{wid}/runs", {"inputs": inputs or {}, **extra})
    assert r.status_code == 202, r.get_json()
    return r.get_json()["job_id"]


def run_of(caller: Caller, jid: str) -> dict[str, Any]:
    r = caller.get(f"/api/workflow-runs/{jid}")
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def ended(caller: Caller, jid: str, timeout: float = 90) -> dict[str, Any]:
    wait_until(lambda: run_of(caller, jid)["status"] in ("completed", "failed", "canceled"),
               timeout=timeout, what=f"workflow run {jid} to end")
    return run_of(caller, jid)


def payload_of(job_id: str) -> dict[str, Any]:
    return pg.fetch_value("SELECT payload FROM agent_jobs WHERE id = %s", (job_id,))


def test_parallel_branches_join_and_pass_outputs_on(alice: Caller) -> None:  # noqa: F811
    wid = save(alice, [
        {"name": "a", "job_type": "system.canary", "payload": {"steps": "{{inputs.n}}"}},
        {"name": "b", "job_type": "system.canary", "depends_on": ["a"],
         "payload": {"steps": 1, "step_seconds": 0.5}},
        {"name": "c", "job_type": "system.canary", "depends_on": ["a"],
         "payload": {"steps": 1, "step_seconds": 0.5}},
        {"name": "d", "job_type": "system.canary", "depends_on": ["b", "c"],
         "payload": {"steps": "{{steps.a.output.steps}}"}},
    ])
    run = ended(alice, start(alice, wid, {"n": 2}))
    assert run["status"] == "completed", run
    steps = run["steps"]
    assert {n: s["status"] for n, s in steps.items()} == dict.fromkeys("abcd", "completed")
    # a whole-value template keeps its JSON type: the input's 2 reached a, and a's output d
    assert payload_of(steps["a"]["job_id"])["steps"] == 2
    assert payload_of(steps["d"]["job_id"])["steps"] == 2
    assert steps["d"]["output"]["steps"] == 2
    # b and c were started together: each was created before the other finished
    times = {n: tuple_row("SELECT created_at, completed_at FROM agent_jobs WHERE id = %s",
                          (steps[n]["job_id"],)) for n in "bc"}
    assert times["b"][0] < times["c"][1] and times["c"][0] < times["b"][1]
    # d started only once both had ended
    d_created = pg.fetch_value("SELECT created_at FROM agent_jobs WHERE id = %s",
                               (steps["d"]["job_id"],))
    assert d_created > max(times["b"][1], times["c"][1])


def test_a_false_condition_skips_and_dependants_see_it_skipped(alice: Caller) -> None:  # noqa: F811
    wid = save(alice, [
        {"name": "gate", "job_type": "system.canary", "condition": "inputs.go == true"},
        {"name": "after", "job_type": "system.canary", "depends_on": ["gate"],
         "payload": {"steps": 1}, "condition": "steps.gate.status == \"skipped\""},
        {"name": "reads", "job_type": "system.canary", "depends_on": ["gate"],
         "condition": "steps.gate.output.steps == null"},
        {"name": "never", "job_type": "system.canary", "depends_on": ["gate"],
         "condition": "steps.gate.status == \"completed\""},
    ])
    run = ended(alice, start(alice, wid, {"go": False}))
    assert run["status"] == "completed", run
    statuses = {n: s["status"] for n, s in run["steps"].items()}
    assert statuses == {"gate": "skipped", "after": "completed", "reads": "completed",
                        "never": "skipped"}
    assert run["steps"]["gate"]["job_id"] is None  # nothing ran for it


def test_stop_cancels_what_runs_and_what_is_left(alice: Caller) -> None:  # noqa: F811
    wid = save(alice, [
        {"name": "slow", "job_type": "system.canary",
         "payload": {"steps": 60, "step_seconds": 1}},
        {"name": "bad", "job_type": "system.canary", "payload": FAILING},
        {"name": "next", "job_type": "system.canary", "depends_on": ["bad"]},
    ])
    jid = start(alice, wid)
    run = ended(alice, jid)
    assert run["status"] == "failed"
    assert "'bad' failed" in run["error"]
    steps = run["steps"]
    assert steps["bad"]["status"] == "failed"
    assert steps["next"]["status"] == "canceled" and steps["next"]["job_id"] is None
    assert steps["slow"]["status"] == "canceled"
    wait_until(lambda: pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s",
                                      (steps["slow"]["job_id"],)) == "canceled",
               timeout=30, what="the running sibling to be canceled")


def test_continue_carries_on_and_skips_only_the_failed_branch(alice: Caller) -> None:  # noqa: F811
    wid = save(alice, [
        {"name": "bad", "job_type": "system.canary", "payload": FAILING,
         "on_failure": "continue"},
        {"name": "needs_bad", "job_type": "system.canary", "depends_on": ["bad"]},
        {"name": "other", "job_type": "system.canary"},
        {"name": "last", "job_type": "system.canary", "depends_on": ["other"]},
    ])
    run = ended(alice, start(alice, wid))
    assert run["status"] == "completed", run
    statuses = {n: s["status"] for n, s in run["steps"].items()}
    assert statuses == {"bad": "failed", "needs_bad": "skipped", "other": "completed",
                        "last": "completed"}


@pytest.mark.parametrize("policy", ["continue", "stop"])
def test_a_step_whose_payload_does_not_resolve_fails_under_its_policy(
        alice: Caller, policy: str) -> None:  # noqa: F811
    # Known only at run time (a template's value): the step fails, and the run goes on or
    # stops as the step's policy says, alone or beside others
    for alone in (True, False):
        steps = [{"name": "a", "job_type": "system.canary", "payload": {"steps": "{{inputs.n}}"},
                  "on_failure": policy}]
        if not alone:
            steps.append({"name": "b", "job_type": "system.canary", "payload": {"steps": 1}})
        run = ended(alice, start(alice, save(alice, steps, name=f"wf-{policy}-{alone}"),
                                 {"n": "many"}))
        assert run["steps"]["a"]["status"] == "failed", run
        assert "steps" in run["steps"]["a"]["error"], run
        assert run["status"] == ("completed" if policy == "continue" else "failed"), run
        assert "wait_any" not in str(run), run


def gate_of(caller: Caller, jid: str) -> dict[str, Any]:
    def pending() -> dict[str, Any] | None:
        items = caller.get(f"/api/inbox?project_id={caller.project}").get_json()["items"]
        mine = [a for a in items if a["source_job_id"] == jid]
        return mine[0] if mine else None
    found = wait_until(pending, timeout=60, what="the gate's approval in the inbox")
    assert isinstance(found, dict)
    return found


def test_an_approval_gate_holds_the_step_and_binds_its_payload(alice: Caller) -> None:  # noqa: F811
    wid = save(alice, [
        {"name": "build", "job_type": "system.canary", "payload": {"steps": 1}},
        {"name": "deploy", "job_type": "system.canary", "depends_on": ["build"],
         "requires_approval": True, "payload": {"steps": "{{inputs.n}}"}},
    ])
    jid = start(alice, wid, {"n": 3})
    gate = gate_of(alice, jid)
    assert gate["action_type"] == "workflow_step"
    assert gate["action_args"]["step"] == "deploy"
    assert gate["action_args"]["payload"] == {"steps": 3}  # resolved: what will run
    # (the gate is written in a step; the run parks just after it)
    wait_until(lambda: run_of(alice, jid)["status"] == "waiting", timeout=30, what="waiting")
    run = run_of(alice, jid)
    assert run["steps"]["deploy"]["status"] == "waiting_approval"
    assert run["steps"]["deploy"]["job_id"] is None
    r = alice.post(f"/api/inbox/{gate['id']}/decision",
                   {"decision": "approved", "version": gate["version"]})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["execution_job_id"] is None  # a gate executes nothing itself
    run = ended(alice, jid)
    assert run["status"] == "completed", run
    assert payload_of(run["steps"]["deploy"]["job_id"])["steps"] == 3
    assert run["steps"]["deploy"]["output"]["steps"] == 3


def test_a_rejected_gate_fails_its_step(alice: Caller) -> None:  # noqa: F811
    wid = save(alice, [{"name": "deploy", "job_type": "system.canary",
                        "requires_approval": True}])
    jid = start(alice, wid)
    gate = gate_of(alice, jid)
    alice.post(f"/api/inbox/{gate['id']}/decision",
               {"decision": "rejected", "version": gate["version"]})
    run = ended(alice, jid)
    assert run["status"] == "failed"
    assert run["steps"]["deploy"]["status"] == "failed"
    assert "rejected" in run["steps"]["deploy"]["error"]
    assert run["steps"]["deploy"]["job_id"] is None


def test_another_owners_run_is_not_found(alice: Caller, bob: Caller) -> None:  # noqa: F811
    wid = save(alice, [{"name": "a", "job_type": "system.canary"}])
    assert bob.post(f"/api/workflows/{wid}/runs", {"inputs": {}}).status_code == 404
    jid = start(alice, wid)
    assert bob.get(f"/api/workflow-runs/{jid}").status_code == 404
    assert bob.get(f"/api/workflows/{wid}/runs").status_code == 404
    assert alice.get(f"/api/workflows/{wid}/runs").get_json()["items"][0]["job_id"] == jid
    bad = alice.post(f"/api/workflows/{wid}/runs", {"inputs": {}, "version": 9})
    assert bad.status_code == 422


def test_a_gate_that_expires_unswept_fails_its_step(alice: Caller) -> None:  # noqa: F811
    from tasks.engine.control import resume_if_ready

    wid = save(alice, [{"name": "deploy", "job_type": "system.canary",
                        "requires_approval": True}])
    jid = start(alice, wid)
    gate = gate_of(alice, jid)
    wait_until(lambda: run_of(alice, jid)["status"] == "waiting", timeout=30, what="waiting")
    # Past its expiry but still `pending` (no sweep has marked it): the run reads it expired
    pg.execute("UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = %s",
               (gate["id"],))
    assert resume_if_ready(jid)  # what the resume sweep does
    run = ended(alice, jid)
    assert run["status"] == "failed"
    assert run["steps"]["deploy"]["error"] == "the approval was expired"
    rounds = pg.fetch_value("SELECT count(*) FROM job_steps WHERE job_id = %s "
                            "AND name LIKE 'run:observe:%%'", (jid,))
    assert rounds == 2, rounds  # one look before the gate, one after it expired


def test_a_rounds_children_are_made_in_one_step_with_the_keys_a_spawn_each_would_have(
        alice: Caller) -> None:  # noqa: F811
    # Issue 26: internal fan-out through enqueue_many. Three steps open in the first round:
    # one recorded step, one INSERT and one publish make their three children.
    wid = save(alice, [{"name": n, "job_type": "system.canary", "payload": {"steps": 1}}
                       for n in "abc"])
    jid = start(alice, wid)
    run = ended(alice, jid)
    assert run["status"] == "completed", run
    names = [r[0] for r in tuples("SELECT name FROM job_steps WHERE job_id = %s ORDER BY seq",
                                  (jid,))]
    assert [n for n in names if n.startswith("spawn")] == ["spawn_many:0:3"], names
    keys = {n: pg.fetch_value("SELECT idempotency_key FROM agent_jobs WHERE id = %s",
                              (run["steps"][n]["job_id"],)) for n in "abc"}
    assert keys == {n: f"child:{jid}:{i}" for i, n in enumerate("abc")}, keys
    assert pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE parent_job_id = %s",
                          (jid,)) == 3


def test_a_canceled_run_takes_its_gate_out_of_the_inbox(alice: Caller) -> None:  # noqa: F811
    # Given a run waiting at an approval gate
    wid = save(alice, [{"name": "deploy", "job_type": "system.canary",
                        "requires_approval": True}])
    jid = start(alice, wid)
    gate = gate_of(alice, jid)
    wait_until(lambda: run_of(alice, jid)["status"] == "waiting", timeout=30, what="waiting")
    # When the run is canceled
    assert alice.post(f"/api/jobs/{jid}/cancel").status_code == 200
    # Then nobody is asked to approve what can never run: the gate leaves the inbox, and
    # a decision on it (a page left open) is a 409 that says why
    pending = alice.get("/api/inbox?status=pending").get_json()["items"]
    assert gate["id"] not in [a["id"] for a in pending], pending
    late = alice.post(f"/api/inbox/{gate['id']}/decision",
                      {"decision": "approved", "version": gate["version"]})
    assert late.status_code == 409, late.get_json()
    assert "canceled" in late.get_json()["error"]["message"]
    assert run_of(alice, jid)["status"] == "canceled"
