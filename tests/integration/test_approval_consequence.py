"""What approving runs is written on the approval by the system that asks for it.

The approval service knows no system's action types: a gate (a plan, a workflow step, a
pull request's merge) runs nothing, a phase advance enqueues the job its row names, any
other action runs as an effect — whichever process decides it.
"""

from __future__ import annotations

from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest
from tasks.services import approvals
from tasks.services.approvals import NewApproval, create_approval, decide
from tasks.startup import phases


def _decide(owner: str, approval_id: object) -> object:
    return decide(approval_id, owner, "approved", 1)


def _jobs(project: str) -> list[dict]:
    return pg.fetch_dicts("SELECT job_type, idempotency_key, payload FROM agent_jobs "
                          "WHERE project_id = %s ORDER BY created_at", (project,))


def test_a_gate_runs_nothing_whatever_its_action_type(owner_and_project) -> None:
    owner, project = owner_and_project
    gate = create_approval(project, None, NewApproval("deploy_hook", "looks like an effect",
                                                      {"url": "https://x.test"},
                                                      on_approve=approvals.GATE))
    assert _decide(owner, gate) is None
    assert _jobs(project) == []


def test_an_action_runs_as_an_effect_unless_its_system_says_otherwise(owner_and_project
                                                                      ) -> None:
    owner, project = owner_and_project
    effect = create_approval(project, None, NewApproval("plan", "named like a gate", {}))
    job = _decide(owner, effect)
    assert [j["job_type"] for j in _jobs(project)] == ["approval.execute"]
    assert pg.fetch_value("SELECT execution_job_id FROM approvals WHERE id = %s",
                          (effect,)) == job


def test_a_phase_advance_enqueues_the_job_its_row_names(owner_and_project) -> None:
    owner, project = owner_and_project
    action = phases.advance_action(0)
    assert action is not None
    advance = create_approval(project, None, phases.approval_for(project, action))
    _decide(owner, advance)
    [job] = _jobs(project)
    assert job["job_type"] == "phase.generate_packet" and job["payload"]["phase"] == 1
    assert job["idempotency_key"] == f"phasegen:{project}:1"


def test_run_job_keeps_the_requests_key() -> None:
    request = EnqueueRequest(project_id="p", job_type="x.y", payload={"a": 1},
                             idempotency_key="k")
    assert approvals.run_job(request) == {"run": "job", "job_type": "x.y",
                                          "payload": {"a": 1}, "idempotency_key": "k"}
