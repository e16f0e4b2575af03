"""Cancel: at once when queued or waiting, at a step boundary when running, down the tree."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from tasks.engine import control, pg, runner, sweeps
from tasks.engine.pg import connect
from tests.conftest import wait_until
from tests.integration.jobdb import (
    job,
    new_job,
    park,
    started_steps,
    status_history,
    steps,
    tuples,
    wait_for,
)


def test_a_queued_job_is_canceled_at_once(project):
    job_id = new_job(project, publish=False)

    assert control.cancel_tree(job_id) == [job_id]

    row = job(job_id)
    assert (row["status"], row["cancel_requested"]) == ("canceled", True)
    assert row["completed_at"] is not None
    assert status_history(job_id) == ["queued", "canceled"]
    # A wake-up still in the broker must not run it.
    assert runner.run_job(str(job_id)) == "skipped"
    assert job(job_id)["status"] == "canceled" and steps(job_id) == []


def test_canceling_twice_or_canceling_a_finished_job_changes_nothing(project):
    job_id = new_job(project, publish=False)
    control.cancel_tree(job_id)
    assert control.cancel_tree(job_id) == []
    assert status_history(job_id) == ["queued", "canceled"]


def test_a_running_job_stops_at_the_next_step_boundary(worker, project):
    # Given a slow canary that has started its second step
    job_id = new_job(project, payload={"steps": 10, "step_seconds": 0.3})
    wait_until(lambda: "step-2" in started_steps(job_id), what="step-2 to start")

    # When it is canceled
    assert control.cancel_tree(job_id) == [], "a running job is asked, not forced"
    time.sleep(0.05)  # let a checkpoint that raced the cancel commit (steps take 0.3s)
    asked_during = len(started_steps(job_id))

    # Then it ends canceled once the current step returns, and no later step starts
    row = wait_for(job_id, timeout=10)
    assert row["status"] == "canceled"
    started = started_steps(job_id)
    assert len(started) == asked_during, f"a step started after the cancel: {started}"
    assert len(started) < 10
    recorded = steps(job_id)
    assert [s["name"] for s in recorded] == started
    assert all(s["status"] == "completed" for s in recorded), "the step in flight finished"
    assert status_history(job_id) == ["queued", "running", "canceled"]


def _sleeping(seconds: int) -> bool:
    return subprocess.run(["pgrep", "-f", f"^sleep {seconds}$"],
                          capture_output=True).returncode == 0


def test_a_cancel_stops_a_long_sandboxed_command_at_once(worker, project):
    # Given a job inside a sandboxed command that would run for 16 minutes (a test suite,
    # a build: the coding agent's commands run this way)
    job_id = new_job(project, "test.long_command", {"seconds": 987})
    wait_until(lambda: _sleeping(987), timeout=30, what="the command to start")
    # When it is canceled
    control.cancel_tree(job_id)
    # Then the command is killed within about a heartbeat, not at its end, and the job
    # ends canceled, its step failed with the cancel
    row = wait_for(job_id, timeout=15)
    assert row["status"] == "canceled", row
    assert not _sleeping(987)
    [step] = steps(job_id)
    assert step["status"] == "failed" and "cancel" in step["error"], step


def test_cancel_cascades_to_the_children_of_a_waiting_parent(worker, project):
    # Given a parent waiting on two slow children
    parent = new_job(project, "test.fan_out",
                     {"children": 2, "child_steps": 20, "child_step_seconds": 0.2})
    wait_for(parent, "waiting")
    children = [r["id"] for r in _children(parent)]
    assert len(children) == 2
    wait_until(lambda: any(job(c)["status"] == "running" for c in children),
               what="a child to be running")

    # When the parent is canceled
    canceled_now = control.cancel_tree(parent)

    # Then the parent (and any queued child) go at once, running children at their next step
    assert parent in canceled_now
    for child in children:
        row = wait_for(child, timeout=10)
        assert row["status"] == "canceled", row
        assert len(steps(child)) < 20
    assert job(parent)["status"] == "canceled", "a canceled child must not resume the parent"
    assert status_history(parent)[-1] == "canceled"


def test_a_sleeping_job_is_canceled_at_once_and_never_wakes(worker, project):
    job_id = new_job(project, "test.sleeper", {"seconds": 0.5})
    wait_for(job_id, "waiting")

    assert control.cancel_tree(job_id) == [job_id]

    row = job(job_id)
    assert (row["status"], row["wake_at"]) == ("canceled", None)
    time.sleep(0.6)
    sweeps.run_sweeps()
    assert job(job_id)["status"] == "canceled"
    assert started_steps(job_id) == ["before", "sleep:0"]
    assert status_history(job_id) == ["queued", "running", "waiting", "canceled"]


def test_canceling_one_child_lets_the_waiting_parent_resume_and_see_it(worker, project):
    parent = new_job(project, "test.fan_out",
                     {"children": 2, "child_steps": 4, "child_step_seconds": 0.2})
    wait_for(parent, "waiting")
    first, second = (c["id"] for c in _children(parent))

    control.cancel_tree(first)

    row = wait_for(parent, timeout=10)
    assert row["status"] == "completed"
    assert row["result"] == {"children": ["canceled", "completed"]}
    assert job(second)["status"] == "completed", "a sibling is not touched"


def _children(parent) -> list[dict]:
    rows = tuples("SELECT id FROM agent_jobs WHERE parent_job_id = %s ORDER BY created_at",
                  (parent,))
    return [job(r[0]) for r in rows]


def test_a_cancel_during_the_step_before_a_suspension_is_not_parked(worker, project):
    # Given a job that is canceled while running the step after which it suspends for an hour
    job_id = new_job(project, "test.canceled_mid_step", {"then": "suspend"})

    # Then it does not sit in `waiting` for that hour: it ends canceled now
    row = wait_for(job_id, timeout=5)
    assert row["status"] == "canceled", row
    assert row["wake_at"] is None
    assert steps(job_id)[0]["status"] == "completed"


def test_a_cancel_during_a_failing_step_is_not_retried(worker, project):
    # Given a job canceled while running a step that then fails with a retryable error
    # (its retry would come after a 60s backoff)
    job_id = new_job(project, "test.canceled_mid_step", {"then": "retry"})

    # Then it ends canceled now instead of queued for another attempt
    row = wait_for(job_id, timeout=5)
    assert row["status"] == "canceled", row
    assert row["attempts"] == 1
    assert steps(job_id)[0]["status"] == "failed"


def test_a_cancel_asked_of_a_job_whose_worker_then_died_is_honoured_after_reclaim(worker,
                                                                                  project):
    # Given a running job that was asked to cancel, whose worker then died mid-step
    job_id = new_job(project, payload={"steps": 2}, publish=False)
    pg.execute("UPDATE agent_jobs SET status = 'running', attempts = 1, locked_by = 'dead:1', "
               "locked_at = now() - interval '1 hour', heartbeat_at = now() - interval '1 hour', "
               "cancel_requested = true WHERE id = %s", (job_id,))
    pg.execute("INSERT INTO job_steps (job_id, seq, name, status) VALUES (%s, 1, 'step-1', "
               "'running')", (job_id,))

    # When the stale sweep gives it back to the queue and a worker picks it up
    assert sweeps.run_sweeps(tick=1)["reclaim_stale"] == 1
    row = wait_for(job_id)

    # Then it is canceled without running another step
    assert row["status"] == "canceled", row
    assert started_steps(job_id) == ["step-1"], "the dead run's start, and no other"
    assert [(s["name"], s["status"]) for s in steps(job_id)] == [("step-1", "failed")]


@pytest.mark.parametrize(
    ("new_status", "why"),
    [
        pytest.param("waiting", "the job suspended just as the cancel came", id="to-waiting"),
        pytest.param("queued", "the job went back for a retry just as the cancel came",
                     id="to-queued"),
    ],
)
def test_a_cancel_racing_a_status_change_is_not_lost(project, new_status, why):
    # Given a running job whose worker is committing a move to `new_status`
    job_id = new_job(project, publish=False)
    park(job_id)
    pg.execute("UPDATE agent_jobs SET status = 'running', attempts = 1, locked_by = 'w:1' "
               "WHERE id = %s", (job_id,))
    with connect() as worker_conn:
        tx = worker_conn.transaction()
        tx.__enter__()
        worker_conn.execute("UPDATE agent_jobs SET status = %s WHERE id = %s",
                            (new_status, job_id))

        # When a cancel arrives meanwhile (it must wait for that row) and the move commits
        result: list = []
        canceler = threading.Thread(target=lambda: result.append(control.cancel_tree(job_id)))
        canceler.start()
        time.sleep(0.3)
        assert canceler.is_alive(), "cancel_tree should be waiting for the row lock"
        tx.__exit__(None, None, None)
        canceler.join(5)

    # Then the cancel took effect on the job as it now is
    assert result == [[job_id]], why
    row = job(job_id)
    assert (row["status"], row["cancel_requested"]) == ("canceled", True)
    assert status_history(job_id)[-1] == "canceled"
