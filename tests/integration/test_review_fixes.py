"""Guarantees a reviewer found holes in: each test failed before its fix."""

from __future__ import annotations

import pytest

from tasks.engine import control, lifecycle, pg, store
from tasks.engine.context import to_json
from tasks.engine.errors import PermanentError
from tests.conftest import in_process_worker_paused
from tests.integration.jobdb import new_job, tuple_row


def test_the_heartbeat_covers_only_jobs_this_process_is_running(project) -> None:
    # Given a job claimed by this process whose run was abandoned (nothing is running it)
    job_id = new_job(project, publish=False)
    claimed = store.claim(job_id, lifecycle.worker_id())
    assert claimed is not None
    pg.execute("UPDATE agent_jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
               (job_id,))
    # When the process beats
    lifecycle.beat_once()
    # Then the abandoned job stays stale, so the sweep can reclaim it
    stale = tuple_row("SELECT heartbeat_at < now() - interval '30 minutes' FROM agent_jobs "
                      "WHERE id = %s", (job_id,))[0]
    assert stale
    # While a job that is running here is kept fresh
    lifecycle.holding(claimed.token, claimed.id)
    try:
        lifecycle.beat_once()
    finally:
        lifecycle.released(claimed.token)
    fresh = tuple_row("SELECT heartbeat_at > now() - interval '1 minute' FROM agent_jobs "
                      "WHERE id = %s", (job_id,))[0]
    assert fresh


def test_a_thread_from_before_a_manual_retry_cannot_write_for_the_new_run(project) -> None:
    # Given attempt 1 claimed by this process, then failed and retried by hand
    job_id = new_job(project, publish=False)
    first = store.claim(job_id, "host:1")
    assert first is not None
    pg.execute("UPDATE agent_jobs SET status = 'failed' WHERE id = %s", (job_id,))
    # (the retry publishes a wake-up: a worker an earlier test started must not claim it first)
    with in_process_worker_paused():
        assert control.retry_failed(job_id)
        # When the same process claims it again: attempt 1 again, same worker id
        second = store.claim(job_id, "host:1")
    assert second is not None and second.attempt == first.attempt
    old = store.Owner(job_id, first.token)
    new = store.Owner(job_id, second.token)
    # Then the old run's writes are refused, the new run's accepted
    assert store.checkpoint(old, 1, None, seq=1, name="step-1") is None
    assert store.checkpoint(new, 1, None, seq=1, name="step-1") is False


@pytest.mark.parametrize("value", ["half an emoji \ud83d", {"k": ["\udc80"]}])
def test_text_postgresql_cannot_store_fails_the_step_at_once(value) -> None:
    with pytest.raises(PermanentError, match="not valid Unicode"):
        to_json(value, "the output")
