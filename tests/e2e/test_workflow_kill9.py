"""The worker driving a workflow run is killed with SIGKILL in the middle of a round: the
run is reclaimed, replays its rounds from the record and completes, and no step of the
DAG is started twice."""

from __future__ import annotations

import pytest

from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.workflows import store
from tasks.workflows.spec import WorkflowSpec
from tests.e2e import procs as p
from tests.integration.jobdb import tuples

pytestmark = pytest.mark.e2e

SPEC = WorkflowSpec.model_validate({"name": "chain", "steps": [
    {"name": "a", "job_type": "system.canary", "payload": {"steps": 2, "step_seconds": 0.3}},
    {"name": "b", "job_type": "system.canary", "depends_on": ["a"],
     "payload": {"steps": 2, "step_seconds": 0.3}},
    {"name": "c", "job_type": "system.canary", "depends_on": ["b"],
     "payload": {"steps": "{{steps.b.output.steps}}"}},
]})


def children(run_id: str) -> list[dict]:
    return pg.fetch_dicts("SELECT id, status, payload FROM agent_jobs WHERE parent_job_id = %s "
                          "ORDER BY created_at", (run_id,))


def driver_blocked(run_id: str) -> bool:
    """The run's worker waits on the row lock the test holds (inside its mirror step)."""
    return bool(pg.fetch_value(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query ILIKE '%%workflow_run_steps%%'"))


def test_a_kill9_mid_round_resumes_the_run_and_starts_no_step_twice(
        procs: p.Procs, project: str) -> None:
    wid = store.save(project, SPEC).id
    a = procs.worker("a", pool="solo")
    run_id = str(enqueue(EnqueueRequest(project_id=project, job_type="workflow.run",
                                        payload={"workflow_id": str(wid)})).job_id)
    # Step a is under way and mirrored; the test then holds the mirrored rows, so the driver's
    # next round (a ended: spawn b, then mirror) blocks inside its mirror step.
    procs.wait(lambda: pg.fetch_value("SELECT count(*) FROM workflow_run_steps WHERE "
                                      "run_job_id = %s AND name = 'a' AND status = 'running'",
                                      (run_id,)), 60, "step a running")
    with pg.connect() as lock, lock.transaction():
        lock.execute("SELECT 1 FROM workflow_run_steps WHERE run_job_id = %s FOR UPDATE",
                     (run_id,))
        procs.wait(lambda: len(children(run_id)) == 2 and driver_blocked(run_id), 60,
                   "the driver spawning b, then blocked mid-round")
        assert p.status(run_id) == "running"
        a.kill9()

    b = procs.worker("b", pool="solo")
    procs.beat("beat")
    procs.wait(lambda: p.status(run_id) in ("completed", "failed"), 90, "the run to end")
    final = p.job(run_id)
    assert final["status"] == "completed", final["last_error"]
    assert final["locked_by"].endswith(f":{b.pid}")
    kids = children(run_id)
    # one child per step, however often the driver replayed its rounds
    assert len(kids) == 3, kids
    assert all(k["status"] == "completed" for k in kids)
    assert kids[2]["payload"]["steps"] == 2  # c read b's output, recorded before or after
    for kid in kids:
        started = p.started_counts(kid["id"])
        assert all(n == 1 for n in started.values()), (kid["id"], started)
    states = dict(tuples("SELECT name, status FROM workflow_run_steps WHERE run_job_id = %s",
                         (run_id,)))
    assert states == {"a": "completed", "b": "completed", "c": "completed"}
