"""A worker killed with SIGKILL mid-job: the job is reclaimed and finishes elsewhere."""

from __future__ import annotations

import pytest

from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.e2e import procs as p

pytestmark = pytest.mark.e2e


def test_kill9_mid_job_resumes_on_another_worker_without_rerunning_completed_steps(
        procs: p.Procs, project: str) -> None:
    # Given worker A running a 6-step canary, killed with SIGKILL inside step 2 or 3
    a = procs.worker("a", pool="solo")
    job_id = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                    payload={"steps": 6, "step_seconds": 0.5})).job_id
    procs.wait(lambda: any(seq in (2, 3) and st == "running"
                           for seq, st in p.steps(job_id).items()), 15, "step 2 or 3 running")
    a.kill9()
    assert p.status(job_id) == "running"
    owner_a = p.job(job_id)["locked_by"]
    assert owner_a.endswith(f":{a.pid}")
    done_before_kill = {seq for seq, st in p.steps(job_id).items() if st == "completed"}
    assert done_before_kill, "the kill came before any step completed"

    # When worker B and a beat come up (the stale sweep reclaims after ~3 s without heartbeat)
    b = procs.worker("b", pool="solo")
    procs.beat("beat")

    # Then the job completes on B
    procs.wait(lambda: p.status(job_id) == "completed", 30, "job completed on worker B")
    final = p.job(job_id)
    assert final["locked_by"].endswith(f":{b.pid}") and final["locked_by"] != owner_a
    assert final["result"] == {"steps": 6, "attempt": 2}
    assert p.steps(job_id) == {n: "completed" for n in range(1, 7)}
    # And the reclaim is on record
    reasons = [e.get("reason") or "" for e in p.status_events(job_id)]
    assert any(r.startswith("worker lost") for r in reasons), reasons
    # And no step completed before the kill was started again; at most the interrupted one was
    started = p.started_counts(job_id)
    assert set(started) == set(range(1, 7))
    assert all(started[seq] == 1 for seq in done_before_kill), started
    rerun = [seq for seq, n in started.items() if n > 1]
    assert len(rerun) <= 1 and all(n <= 2 for n in started.values()), started
