"""Suspend and resume: a parent waits for its children, a job sleeps on a durable timer."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

from tasks.engine import sweeps
from tests.integration.jobdb import (
    job,
    new_job,
    started_steps,
    status_history,
    steps,
    sweep_until,
    tuples,
    wait_for,
)


def _children(parent) -> list[dict]:
    rows = tuples("SELECT id FROM agent_jobs WHERE parent_job_id = %s ORDER BY created_at",
                  (parent,))
    return [job(r[0]) for r in rows]


def test_parent_waits_for_its_children_then_resumes_where_it_stopped(worker, project):
    # Given a parent fanning out to three children slow enough that it must wait
    parent = new_job(project, "test.fan_out",
                     {"children": 3, "child_steps": 2, "child_step_seconds": 0.2})

    # When everything has run (no sweep: the last child's completion resumes the parent)
    row = wait_for(parent)

    # Then the parent completed with its children's statuses, replaying its earlier steps
    assert row["status"] == "completed"
    assert row["result"] == {"children": ["completed"] * 3}
    assert status_history(parent) == ["queued", "running", "waiting", "queued", "running",
                                      "completed"]
    started = Counter(started_steps(parent))
    assert started == {"before": 1, "spawn:system.canary:0": 1, "spawn:system.canary:1": 1,
                       "spawn:system.canary:2": 1, "after": 1}, "each step ran exactly once"
    children = _children(parent)
    assert len(children) == 3, "the replayed spawns made no new children"
    assert {c["status"] for c in children} == {"completed"}
    assert [s["output"] for s in steps(parent)][1:4] == [str(c["id"]) for c in children]
    # And waiting for the children cost no attempt: one run, no failure
    assert row["wait_for"] is None and row["attempts"] == 1


def test_children_that_finish_before_the_parent_suspends_still_resume_it(worker, project):
    """Instant children race the parent's own move to `waiting`; nobody may miss the wake-up."""
    parents = [new_job(project, "test.fan_out", {"children": 2}) for _ in range(5)]
    for parent in parents:
        row = wait_for(parent)
        assert row["status"] == "completed"
        assert row["result"] == {"children": ["completed", "completed"]}


def test_a_failed_child_is_reported_to_the_parent_not_waited_on_forever(worker, project):
    # Given a parent whose children fail permanently
    parent = new_job(project, "test.fan_out", {"children": 2, "child_type": "test.doomed",
                                               "child_payload": {"message": "no"}})

    # When the children have failed
    row = wait_for(parent, timeout=10)

    # Then the parent resumed and saw the failures
    assert row["status"] == "completed", row
    assert row["result"] == {"children": ["failed", "failed"]}
    assert {c["status"] for c in _children(parent)} == {"failed"}


def test_durable_sleep_leaves_the_worker_and_comes_back_when_due(worker, project):
    # Given a job that sleeps for one second between two steps
    job_id = new_job(project, "test.sleeper", {"seconds": 1.0})

    # When it reaches the sleep, it is parked in the database, not in a worker thread
    row = wait_for(job_id, "waiting")
    assert row["locked_by"] is not None and row["wake_at"] is not None
    sleep_step = next(s for s in steps(job_id) if s["name"] == "sleep:0")
    assert abs(row["wake_at"] - (sleep_step["started_at"] + timedelta(seconds=1))) \
        < timedelta(seconds=0.5)
    assert started_steps(job_id) == ["before", "sleep:0"]

    # Then the sweeps (standing in for beat) resume it once the timer is due, and it finishes
    t0 = time.monotonic()
    sweep_until(lambda: job(job_id)["status"] == "completed", timeout=10,
                what="the sleeper to complete")
    row = job(job_id)
    assert row["wake_at"] is None
    assert row["completed_at"] - sleep_step["started_at"] >= timedelta(seconds=1.0)
    assert time.monotonic() - t0 < 4, "resumed within a couple of sweep ticks"
    assert row["result"] == {"slept": 1.0}
    assert Counter(started_steps(job_id)) == {"before": 1, "sleep:0": 1, "after": 1}
    assert status_history(job_id) == ["queued", "running", "waiting", "queued", "running",
                                      "completed"]


def test_a_sleeper_is_not_resumed_before_its_timer(worker, project):
    job_id = new_job(project, "test.sleeper", {"seconds": 30})
    wait_for(job_id, "waiting")
    for _ in range(3):
        sweeps.run_sweeps()
        time.sleep(0.4)
    assert job(job_id)["status"] == "waiting"



def test_a_failed_parent_cancels_its_unfinished_children(worker, project):
    # Given a parent that spawns two slow children and then fails for good
    parent = new_job(project, "test.abandon", {})
    # When it fails
    wait_for(parent, "failed")
    # Then its children do not run on for nobody: they end canceled, not completed
    children = _children(parent)
    assert len(children) == 2
    for child in children:
        assert wait_for(child["id"], timeout=20)["status"] == "canceled"
