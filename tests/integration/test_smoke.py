from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.conftest import wait_until
from tests.integration.jobdb import tuple_row, tuples


def test_canary_completes_with_every_step_recorded(worker, project):
    job = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                 payload={"steps": 3}))
    wait_until(lambda: tuple_row("SELECT status FROM agent_jobs WHERE id = %s",
                                 (job.job_id,))[0] == "completed", what="canary")
    steps = tuples("SELECT seq, name, status, output FROM job_steps WHERE job_id = %s "
                   "ORDER BY seq", (job.job_id,))
    assert steps == [(1, "step-1", "completed", {"n": 1}), (2, "step-2", "completed", {"n": 2}),
                     (3, "step-3", "completed", {"n": 3})]
