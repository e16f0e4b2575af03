"""One owner at a time: every write of a run is fenced by its claim token, waits the row's
lock, and applies once even when retried after a lost connection."""

from __future__ import annotations

import threading

from tasks.engine import pg, runner, store, sweeps
from tasks.engine.events import step_data
from tasks.engine.status import JobStatus
from tests.conftest import in_process_worker_paused
from tests.integration.jobdb import (
    job,
    new_job,
    started_steps,
    status_history,
    step_events,
    tuple_row,
    tuples,
    wait_for,
)

S = JobStatus


def _claim(project: str) -> store.ClaimedJob:
    job_id = new_job(project, payload={"steps": 3}, publish=False)
    claimed = store.claim(job_id, "host:1")
    assert claimed is not None
    return claimed


def test_a_checkpoint_that_began_before_a_reclaim_committed_writes_nothing(project) -> None:
    # Given a run, and a reclaim holding the job's row, about to commit
    run = _claim(project)
    owner = store.Owner(run.id, run.token)
    reclaimer = pg.connect()
    reclaimer.execute("BEGIN")
    reclaimer.execute("UPDATE agent_jobs SET status = 'queued' WHERE id = %s", (run.id,))
    # When the run writes a step start meanwhile (it must wait for the row's lock)
    outcome: list[bool | None] = []
    writer = threading.Thread(target=lambda: outcome.append(
        store.checkpoint(owner, 1, None, seq=1, name="step-1", events=[])))
    writer.start()
    writer.join(0.5)
    assert writer.is_alive(), "the checkpoint did not wait for the row it checks"
    reclaimer.execute("COMMIT")
    reclaimer.close()
    writer.join(5)
    # Then it sees the reclaim and writes nothing
    assert outcome == [None]
    assert tuples("SELECT count(*) FROM job_steps WHERE job_id = %s", (run.id,))[0][0] == 0


def test_a_write_retried_after_its_commit_applies_once(project) -> None:
    # Given a run whose step-start write landed but whose answer was lost
    run = _claim(project)
    owner = store.Owner(run.id, run.token)
    started = [store.event(store.Order.NEXT, "step", "step-1 started",
                           step_data("step-1", 1, "started"))]
    assert store.checkpoint(owner, 1, None, seq=1, name="step-1", events=started) is False
    # When the engine retries the same write (same number)
    assert store.checkpoint(owner, 1, None, seq=1, name="step-1", events=started) is False
    # Then one event and one start were recorded
    assert step_events(run.id) == ["step-1"]
    assert tuples("SELECT attempts FROM job_steps WHERE job_id = %s", (run.id,)) == [(1,)]
    # And a finish retried after it committed still reports the move, once
    first = store.finish(owner, 2, S.COMPLETED, None, result="{}")
    again = store.finish(owner, 2, S.COMPLETED, None, result="{}")
    assert first is not None and again is not None and again.status == S.COMPLETED
    assert status_history(run.id) == ["queued", "running", "completed"]


def test_a_finish_by_an_older_run_is_refused(project) -> None:
    # Given a run that was reclaimed (stale) and claimed again by another worker
    first = _claim(project)
    pg.execute("UPDATE agent_jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
               (first.id,))
    # (the reclaim publishes a wake-up: the session worker, if an earlier test started it,
    # must not take the job before host:2 does)
    with in_process_worker_paused():
        sweeps.run_sweeps(tick=sweeps.current_tick() + 1000)
        second = store.claim(first.id, "host:2")
    assert second is not None
    # When the first run, back from the dead, tries to finish
    late = store.finish(store.Owner(first.id, first.token), 1, S.COMPLETED, None)
    # Then nothing is written for it; the second run still owns the job
    assert late is None
    row = job(first.id)
    assert (row["status"], row["claim_token"], row["locked_by"]) == (
        "running", second.token, "host:2")


def test_a_duplicate_delivery_to_this_process_leaves_the_live_run_heartbeating(project) -> None:
    # Given a run in progress in this process (its heartbeat covers it)
    from tasks.engine import lifecycle

    run = _claim(project)
    lifecycle.holding(run.token, run.id)
    try:
        # When a duplicate wake-up of the same job is delivered to another thread here
        assert runner.run_job(str(run.id)) == "skipped"
        pg.execute("UPDATE agent_jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
                   (run.id,))
        lifecycle.beat_once()
    finally:
        lifecycle.released(run.token)
    # Then the live run is still heartbeated: the stale sweep will not take it away
    fresh = tuple_row("SELECT heartbeat_at > now() - interval '1 minute' FROM agent_jobs "
                      "WHERE id = %s", (run.id,))
    assert fresh == (True,)


def _kill_other_connections() -> int:
    """Cut the worker's connections (not this test thread's, nor the admin one)."""
    mine = pg.connection().info.backend_pid
    with pg.connect() as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid NOT IN (pg_backend_pid(), %s) "
            "AND application_name LIKE 'switchyard-%%'", (mine,)).fetchall()
    return len(rows)


def test_connections_lost_mid_job_cost_the_job_nothing(worker, project) -> None:
    # Given a canary running on the in-process worker
    job_id = new_job(project, payload={"steps": 6, "step_seconds": 0.3})
    wait_for(job_id, "running")
    # When every engine connection to the database is cut, twice, while it runs
    for _ in range(2):
        wait_until_step_started(job_id)
        assert _kill_other_connections() >= 1
    # Then it completes in its first attempt, every step run once
    row = wait_for(job_id, timeout=30)
    assert (row["status"], row["attempts"], row["last_error"]) == ("completed", 1, None)
    assert sorted(step_events(job_id, "completed")) == [f"step-{n}" for n in range(1, 7)]


def wait_until_step_started(job_id) -> None:
    from tests.conftest import wait_until

    seen = len(started_steps(job_id))
    wait_until(lambda: len(started_steps(job_id)) > seen, timeout=10,
               what="the next step started")


def test_an_early_delivery_is_sent_again_for_when_the_database_says_it_is_due(project) -> None:
    # Given a retry due in 2 s by the database's clock, its wake-up delivered now (a
    # countdown that ran on a worker clock ahead of the database's)
    from datetime import timedelta

    from tests.integration.jobdb import park, parked_wakeups

    job_id = new_job(project, publish=False, run_after=pg.db_now() + timedelta(seconds=2))
    park(job_id)
    # When it is delivered
    outcome = runner.run_job(str(job_id))
    # Then nothing ran, and the wake-up was published again rather than dropped (before,
    # it waited for the dispatch sweep's redispatch period)
    assert outcome == "early"
    assert job(job_id)["status"] == "queued" and job(job_id)["attempts"] == 0
    assert parked_wakeups() == [str(job_id)]
