"""Recovery sweeps against real PostgreSQL and Redis: reclaim, expire, re-dispatch, resume.

Jobs the test must inspect before any worker touches them are "parked": their
wake-ups go to a queue no worker consumes, where the test reads them back.
"""

from __future__ import annotations

import itertools
import time
from datetime import timedelta

import pytest

from tasks.engine import pg, sweeps
from tasks.engine.sweeps import SWEEP_LOCK
from tests.integration.jobdb import (
    job,
    new_job,
    park,
    parked_wakeups,
    status_history,
    steps,
    sweep_until,
    tuple_row,
    tuples,
    wait_for,
)

NOTHING = {"reclaim_stale": 0, "expire_timeouts": 0, "dispatch_due": 0, "redispatch_lost": 0,
           "resume_waiting": 0, "expire_approvals": 0}


def make_running(job_id, *, heartbeat_age: str = "1 hour", locked_age: str = "1 hour",
                 attempts: int = 1, worker: str = "dead-host:4242") -> None:
    """Make the row look like a worker (by default a long-dead one) holds it."""
    pg.execute("UPDATE agent_jobs SET status = 'running', attempts = %s, locked_by = %s, "
               "locked_at = now() - %s::interval, heartbeat_at = now() - %s::interval, "
               "started_at = now() - %s::interval WHERE id = %s",
               (attempts, worker, locked_age, heartbeat_age, locked_age, job_id))


def add_step(job_id, seq: int, name: str, status: str, output: str | None = None) -> None:
    pg.execute("INSERT INTO job_steps (job_id, seq, name, status, output) "
               "VALUES (%s, %s, %s, %s, %s::jsonb)", (job_id, seq, name, status, output))


_ticks = itertools.count(1000)


def sweep() -> dict[str, int | None]:
    """Run the sweeps at a tick of their own, so no two calls collide on the clock."""
    return sweeps.run_sweeps(tick=next(_ticks))


# --- reclaim_stale ---------------------------------------------------------------------------

def test_a_stale_running_job_is_requeued_with_its_running_step_failed(project):
    # Given a job whose worker died in step 2, with attempts left
    job_id = new_job(project, payload={"steps": 3}, publish=False)
    park(job_id)
    make_running(job_id, attempts=1)
    add_step(job_id, 1, "step-1", "completed", '{"n": 1}')
    add_step(job_id, 2, "step-2", "running")

    # When the sweeps run
    assert sweep() == NOTHING | {"reclaim_stale": 1}

    # Then it is queued again, its running step is marked failed, and its wake-up is published
    row = job(job_id)
    assert (row["status"], row["attempts"], row["completed_at"]) == ("queued", 1, None)
    assert row["last_error"].startswith("worker lost: no heartbeat since ")
    assert [(s["name"], s["status"]) for s in steps(job_id)] == [("step-1", "completed"),
                                                                  ("step-2", "failed")]
    assert steps(job_id)[1]["error"] == "interrupted: " + row["last_error"]
    assert status_history(job_id) == ["queued", "queued"]
    assert parked_wakeups() == [str(job_id)], "exactly one wake-up (dispatch_due sent none)"


def test_a_stale_job_on_its_last_attempt_fails(project):
    job_id = new_job(project, publish=False, max_attempts=2)
    park(job_id)
    make_running(job_id, attempts=2)

    assert sweep()["reclaim_stale"] == 1

    row = job(job_id)
    assert row["status"] == "failed" and row["completed_at"] is not None
    assert row["last_error"].startswith("worker lost")
    assert parked_wakeups() == []


def test_a_live_heartbeat_is_not_reclaimed(project):
    job_id = new_job(project, publish=False)
    park(job_id)
    make_running(job_id, heartbeat_age="1 second", locked_age="1 second")  # stale after 3s

    assert sweep() == NOTHING
    assert job(job_id)["status"] == "running"


def test_a_reclaimed_job_is_run_by_a_worker_and_resumes_after_its_last_step(worker, project):
    # Given a canary whose worker died in step 2 after step 1 was recorded
    job_id = new_job(project, payload={"steps": 3}, publish=False)
    make_running(job_id, attempts=1)
    add_step(job_id, 1, "step-1", "completed", '{"n": 1}')
    add_step(job_id, 2, "step-2", "running")

    # When the sweep reclaims it
    assert sweep()["reclaim_stale"] == 1

    # Then a worker finishes it on attempt 2 without running step 1 again
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    assert [(s["name"], s["attempts"]) for s in steps(job_id)] == [("step-1", 1), ("step-2", 2),
                                                                   ("step-3", 1)]


def test_a_child_that_dies_on_its_last_attempt_resumes_its_waiting_parent(project):
    parent = new_job(project, "test.fan_out", publish=False)
    child = new_job(project, publish=False, parent_job_id=parent, max_attempts=1)
    park(parent)
    pg.execute("UPDATE agent_jobs SET status = 'waiting', wait_for = ARRAY[%s]::uuid[] "
               "WHERE id = %s", (child, parent))
    make_running(child, attempts=1)

    assert sweep()["reclaim_stale"] == 1

    assert job(child)["status"] == "failed"
    assert job(parent)["status"] == "queued"
    assert parked_wakeups() == [str(parent)]


# --- expire_timeouts -------------------------------------------------------------------------

def test_a_job_running_past_its_timeout_is_failed(project):
    # Given a job with a 1s timeout whose (live) worker is stuck inside a step for an hour
    over = new_job(project, publish=False, timeout_seconds=1)
    park(over)
    make_running(over, heartbeat_age="0 seconds", locked_age="1 hour")
    add_step(over, 1, "step-1", "running")
    # and one still within timeout + the stale allowance
    within = new_job(project, publish=False, timeout_seconds=60)
    park(within)
    make_running(within, heartbeat_age="0 seconds", locked_age="30 seconds")

    assert sweep() == NOTHING | {"expire_timeouts": 1}

    row = job(over)
    assert (row["status"], row["last_error"]) == ("failed",
                                                  "JobTimeout: still running 1s after it started")
    assert steps(over)[0]["status"] == "failed"
    assert status_history(over)[-1] == "failed"
    assert job(within)["status"] == "running"
    assert parked_wakeups() == [], "a timed-out job is not retried"


@pytest.mark.parametrize("why", ["timeout", "stale on its last attempt"])
def test_a_parent_failed_by_a_sweep_takes_its_unfinished_children_with_it(project, why):
    # Given a running parent with a queued and a running child
    parent = new_job(project, publish=False, timeout_seconds=1, max_attempts=1)
    park(parent)
    if why == "timeout":
        make_running(parent, heartbeat_age="0 seconds", locked_age="1 hour")
    else:
        make_running(parent, heartbeat_age="1 hour", locked_age="1 hour")
    queued_child = new_job(project, publish=False, parent_job_id=parent)
    running_child = new_job(project, publish=False, parent_job_id=parent)
    make_running(running_child, heartbeat_age="0 seconds", locked_age="0 seconds")
    # When a sweep fails the parent
    sweep()
    assert job(parent)["status"] == "failed"
    # Then nobody is left to use the children's results: the queued one is canceled at
    # once and the running one is asked to stop at its next step boundary
    assert job(queued_child)["status"] == "canceled"
    assert job(running_child)["cancel_requested"] is True


# --- dispatch_due ----------------------------------------------------------------------------

def test_a_lost_wake_up_is_sent_again_and_the_job_completes(worker, project):
    # Given a queued job whose wake-up never reached the broker, long ago
    job_id = new_job(project, payload={"steps": 1}, publish=False)
    pg.execute("UPDATE agent_jobs SET dispatched_at = now() - interval '1 hour' WHERE id = %s",
               (job_id,))
    time.sleep(0.3)
    assert job(job_id)["status"] == "queued", "nothing else wakes it"

    # When the sweeps run, Then it is re-dispatched and a worker completes it
    assert sweep()["dispatch_due"] == 1
    assert wait_for(job_id)["status"] == "completed"


def test_a_recently_dispatched_job_is_not_sent_twice(project):
    lost = new_job(project, publish=False)
    park(lost)
    pg.execute("UPDATE agent_jobs SET dispatched_at = now() - interval '1 hour' WHERE id = %s",
               (lost,))
    recent = new_job(project, publish=False)  # dispatched_at = now(): its wake-up is in flight
    park(recent)

    assert sweep()["dispatch_due"] == 1
    assert parked_wakeups() == [str(lost)]
    assert sweep()["dispatch_due"] == 0, "just re-sent: not again at the next tick"


def test_a_job_with_run_after_in_the_future_waits_until_it_is_due(worker, project):
    # Given a job due in 1.5s (enqueue publishes nothing for a job that is not due)
    from datetime import UTC, datetime

    due = datetime.now(UTC) + timedelta(seconds=1.5)
    job_id = new_job(project, payload={"steps": 1}, run_after=due)
    assert job(job_id)["dispatched_at"] is None

    # When the sweeps run before it is due, nothing happens
    assert sweep()["dispatch_due"] == 0
    time.sleep(0.3)
    assert job(job_id)["status"] == "queued"

    # Then once due, a sweep dispatches it and the worker runs it
    sweep_until(lambda: job(job_id)["status"] == "completed", timeout=10, what="the due job")
    row = job(job_id)
    assert row["started_at"] >= due


def test_a_retry_whose_countdown_message_was_lost_is_dispatched_when_due(project):
    job_id = new_job(project, publish=False)
    park(job_id)
    # As the runner leaves a retried job: run_after and dispatched_at both at now + delay
    pg.execute("UPDATE agent_jobs SET run_after = now() + interval '0.5 seconds', "
               "dispatched_at = now() + interval '0.5 seconds' WHERE id = %s", (job_id,))
    assert sweep()["dispatch_due"] == 0
    time.sleep(0.6)
    # Its countdown wake-up is presumed in flight; it is re-sent after the redispatch window.
    assert sweep()["dispatch_due"] == 0
    pg.execute("UPDATE agent_jobs SET dispatched_at = dispatched_at - interval '1 hour' "
               "WHERE id = %s", (job_id,))
    assert sweep()["dispatch_due"] == 1
    assert parked_wakeups() == [str(job_id)]


# --- resume_waiting --------------------------------------------------------------------------

def test_waiting_jobs_resume_when_their_timer_is_due_or_children_are_done(project):
    ids = {name: new_job(project, publish=False) for name in
           ("timer_due", "timer_later", "children_done", "child_running")}
    for job_id in ids.values():
        park(job_id)
    done_child = new_job(project, publish=False, parent_job_id=ids["children_done"])
    busy_child = new_job(project, publish=False, parent_job_id=ids["child_running"])
    pg.execute("UPDATE agent_jobs SET status = 'completed' WHERE id = %s", (done_child,))
    make_running(busy_child, heartbeat_age="0 seconds", locked_age="0 seconds")
    waits = {
        "timer_due": ("now() - interval '1 second'", None),
        "timer_later": ("now() + interval '1 hour'", None),
        "children_done": ("NULL", done_child),
        "child_running": ("NULL", busy_child),
    }
    for name, (wake_at, child) in waits.items():
        pg.execute(f"UPDATE agent_jobs SET status = 'waiting', wake_at = {wake_at}, "
                   "wait_for = CASE WHEN %s::uuid IS NULL THEN NULL ELSE ARRAY[%s::uuid] END "
                   "WHERE id = %s", (child, child, ids[name]))

    assert sweep() == NOTHING | {"resume_waiting": 2}

    statuses = {name: job(job_id)["status"] for name, job_id in ids.items()}
    assert statuses == {"timer_due": "queued", "timer_later": "waiting",
                        "children_done": "queued", "child_running": "waiting"}
    assert sorted(parked_wakeups()) == sorted([str(ids["timer_due"]), str(ids["children_done"])])
    assert job(ids["timer_due"])["wake_at"] is None
    assert status_history(ids["timer_due"])[-1] == "queued"


def test_a_resumed_job_is_run_by_the_worker(worker, project):
    job_id = new_job(project, payload={"steps": 1}, publish=False)
    pg.execute("UPDATE agent_jobs SET status = 'waiting', wake_at = now() WHERE id = %s", (job_id,))
    assert sweep()["resume_waiting"] == 1
    assert wait_for(job_id)["status"] == "completed"


# --- once per tick, one at a time ------------------------------------------------------------

def test_each_sweep_runs_once_per_tick(project):
    tick = sweeps.current_tick()
    first = sweeps.run_sweeps(tick=tick)
    assert first == NOTHING

    # A job made stale after the first run is left for the next tick
    job_id = new_job(project, publish=False)
    park(job_id)
    make_running(job_id)
    second = sweeps.run_sweeps(tick=tick)
    assert second == dict.fromkeys(NOTHING, None)
    assert job(job_id)["status"] == "running"

    assert sweeps.run_sweeps(tick=tick + 1)["reclaim_stale"] == 1
    runs = tuples("SELECT sweep, tick, stats FROM sweep_runs ORDER BY tick, sweep")
    assert len(runs) == 2 * len(sweeps.SWEEPS)  # every sweep, once in each of two ticks
    assert ("reclaim_stale", tick + 1, {"rows": 1}) in runs


def test_the_current_tick_follows_the_sweep_interval():
    # SWITCHYARD_SWEEP_SECONDS is 1 in tests.
    assert sweeps.current_tick(1000.0) == 1000
    assert sweeps.current_tick(1000.99) == 1000
    assert sweeps.current_tick(1001.0) == 1001


def test_a_sweep_already_in_progress_elsewhere_makes_this_one_skip(project):
    from tasks.engine.pg import connect

    job_id = new_job(project, publish=False)
    park(job_id)
    make_running(job_id)
    with connect() as other:
        other.execute("SELECT pg_advisory_lock(%s)", (SWEEP_LOCK,))
        assert sweep() == dict.fromkeys(NOTHING, None)
        other.execute("SELECT pg_advisory_unlock(%s)", (SWEEP_LOCK,))
    assert job(job_id)["status"] == "running"
    assert tuples("SELECT count(*) FROM sweep_runs")[0][0] == 0, "the tick is not used up"
    assert sweep()["reclaim_stale"] == 1


def test_a_live_worker_in_a_long_step_keeps_its_job(worker, project):
    """The heartbeat outlives the stale window (3s in tests): a slow step is not 'dead'."""
    from tasks.engine import lifecycle

    job_id = new_job(project, payload={"steps": 1, "step_seconds": 4.0})
    wait_for(job_id, "running", timeout=60)  # a loaded machine: the claim may wait
    beats = set()
    while job(job_id)["status"] == "running":
        sweeps.run_sweeps()
        beats.add(job(job_id)["heartbeat_at"])
        time.sleep(0.25)
    row = job(job_id)
    assert (row["status"], row["attempts"]) == ("completed", 1)
    assert len(beats) >= 4, "heartbeat_at moved on while the step ran"
    me = tuple_row("SELECT running, stopped_at FROM worker_heartbeats WHERE worker = %s",
                   (lifecycle.worker_id(),))
    assert me is not None and me[1] is None


# --- expire_approvals ------------------------------------------------------------------------


def test_expire_approvals_takes_overdue_pending_approvals_out_of_the_inbox(project):
    from tasks.services.approvals import NewApproval, create_approval

    overdue = create_approval(project, None, NewApproval("email", "old", {"to": "a@b.test"}))
    fresh = create_approval(project, None, NewApproval("email", "new", {"to": "c@d.test"}))
    pg.execute("UPDATE approvals SET expires_at = now() - interval '1 minute' WHERE id = %s",
               (overdue,))
    assert sweep() == NOTHING | {"expire_approvals": 1}
    status = dict(tuples("SELECT id, status FROM approvals"))
    assert status == {overdue: "expired", fresh: "pending"}


def test_after_a_database_restart_live_workers_get_a_full_period_to_check_back_in() -> None:
    """A restart longer than the stale threshold must not make every live run look lost:
    before the fix the first sweep after it reclaimed them all (and they ran twice)."""
    import tempfile
    from pathlib import Path

    import psycopg

    from app.ops.embedded import scratch_database
    from tasks.settings import libpq_url
    from tests.support.private_pg import PrivatePostgres

    server = PrivatePostgres(Path(tempfile.mkdtemp(prefix="switchyard-restart-")))
    server.start()
    reclaim = next(s for s in sweeps.SWEEPS if s.name == "reclaim_stale")
    try:
        with scratch_database(server.url, "switchyard_restart") as url:
            def reclaimed() -> int:
                with psycopg.connect(libpq_url(url), autocommit=True) as conn:
                    return len(reclaim.run(conn, {"stale": 3.0}))

            with psycopg.connect(libpq_url(url), autocommit=True) as conn:
                conn.execute("INSERT INTO projects (id, name) VALUES (gen_random_uuid(), 'p')")
                conn.execute(
                    "INSERT INTO agent_jobs (id, project_id, job_type, status, payload, "
                    "idempotency_key, attempts, locked_by, locked_at, heartbeat_at) "
                    "SELECT gen_random_uuid(), id, 'system.canary', 'running', '{}', 'k', 1, "
                    "'a-live-worker:1', now() - interval '10 s', now() - interval '10 s' "
                    "FROM projects WHERE name = 'p'")
            time.sleep(3.2)  # the database has been up for longer than the threshold
            # Given the database crashes and comes back while its worker cannot check in
            server.stop("immediate")
            server.start()
            # Then the first sweeps leave the run alone for one stale period
            assert reclaimed() == 0
            # and only a worker still silent after it is declared lost
            time.sleep(3.2)
            assert reclaimed() == 1
    finally:
        server.close()
