"""The engine's promise tried from outside, with real processes: duplicate wake-ups,
a broker wiped under live workers at default settings, a worker whose clock is off.

Each of these failed before its fix (see the commit that added them).
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from tasks.engine.dispatch import dispatch
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.e2e import procs as p
from tests.integration.jobdb import tuple_row
from tests.support import broker

pytestmark = pytest.mark.e2e


def canary(project: str, **payload: object) -> str:
    return str(enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                      payload=payload)).job_id)


def test_a_duplicate_wake_up_leaves_the_running_job_with_its_one_owner(
        procs: p.Procs, project: str) -> None:
    # Given a 4-step canary (2.5 s steps) running on a threads worker, and a beat
    procs.worker("w", pool="threads", concurrency=4)
    procs.beat("beat")
    job_id = canary(project, steps=4, step_seconds=2.5)
    procs.wait(lambda: p.steps(job_id).get(1) == "running", 15, "step 1 running")

    # When its wake-up is published once more (as the dispatch sweep does for a backlog)
    dispatch(job_id, "default", 5)

    # Then the job completes in one run: the duplicate neither stopped the run's
    # heartbeat (which would let the stale sweep start a second run) nor ran anything
    procs.wait(lambda: p.status(job_id) == "completed", 40, "the canary completed")
    assert p.job(job_id)["attempts"] == 1
    assert p.started_counts(job_id) == {1: 1, 2: 1, 3: 1, 4: 1}
    assert [e["status"] for e in p.status_events(job_id)] == ["queued", "running", "completed"]


DEFAULT_TIMINGS = {  # the shipped defaults, not the tests' fast ones
    "SWITCHYARD_HEARTBEAT_SECONDS": "10", "SWITCHYARD_STALE_AFTER_SECONDS": "60",
    "SWITCHYARD_SWEEP_SECONDS": "5", "SWITCHYARD_REDISPATCH_AFTER_SECONDS": "60",
    "SWITCHYARD_PREFETCH_MULTIPLIER": "1",
}


def test_a_broker_wiped_under_live_workers_is_noticed_in_seconds(
        procs: p.Procs, project: str) -> None:
    # Given a live worker kept busy by two long jobs and a beat, all at default timings
    procs.worker("w", pool="threads", concurrency=2, env=DEFAULT_TIMINGS)
    procs.beat("beat").popen  # noqa: B018 - started for its sweeps
    busy = [canary(project, steps=1, step_seconds=6) for _ in range(2)]
    procs.wait(lambda: all(p.status(b) == "running" for b in busy), 15, "the worker busy")
    # And 20 jobs queued behind them, the wake-ups of the 14 their owner may still have out
    # (SWITCHYARD_OWNER_MAX_ACTIVE, 16, less the 2 running) waiting in the broker
    ids = [canary(project, steps=2) for _ in range(20)]
    assert broker.waiting("default") >= 12

    # When the broker loses every message
    broker.wipe()
    flushed = time.monotonic()

    # Then all 20 start within 15 s (not after the 60 s redispatch period) and complete once
    def started() -> bool:
        row = tuple_row("SELECT count(*) FILTER (WHERE started_at IS NOT NULL) FROM agent_jobs "
                        "WHERE id = ANY(%s)", (ids,))
        return row is not None and row[0] == 20

    procs.wait(started, 15, "all 20 jobs started")
    took = time.monotonic() - flushed
    procs.wait(lambda: all(p.status(i) == "completed" for i in ids), 30, "all 20 completed")
    assert all(p.job(i)["attempts"] == 1 for i in ids)
    print(f"broker wiped: all 20 jobs started {took:.1f}s later")


def _history(job_id: str) -> list[str]:
    return [e["status"] for e in p.status_events(job_id)]


@pytest.mark.skipif(shutil.which("faketime") is None and os.environ.get("CI") != "true",
                    reason="Debian's faketime is not installed (.ci/run installs it)")
@pytest.mark.parametrize("skew", ["-5s", "+5s"])
def test_a_worker_with_a_skewed_clock_sleeps_once_retries_on_time_and_burns_nothing(
        procs: p.Procs, project: str, skew: str) -> None:
    # Given the only worker runs 5 s off the database's clock, and a beat on the right time
    procs._spawn("w", ["faketime", "-f", skew, *p.CELERY, "worker", "-P", "threads", "-c", "2",
                       "-n", "w@%h", "-Q", p.QUEUES, "-l", "INFO", "--without-mingle",
                       "--without-gossip", "--without-heartbeat"])
    procs.beat("beat")
    # When a canary sleeps 2 s durably, then fails its last step once and retries
    job_id = canary(project, steps=2, sleep_seconds=2, fail_first_attempts=1)
    procs.wait(lambda: p.status(job_id) == "completed", 40, "the canary completed")

    # Then it slept once, for about 2 s by the database's clock, and retried once
    assert _history(job_id) == ["queued", "running", "waiting", "queued", "running", "queued",
                                "running", "completed"]
    slept = tuple_row(
        "SELECT extract(epoch FROM max(created_at) FILTER (WHERE message = 'queued' "
        "AND data->>'from' = 'waiting') - min(created_at) FILTER (WHERE message = 'waiting'))"
        " FROM agent_job_events WHERE job_id = %s AND type = 'status'", (job_id,))[0]
    assert 1.5 <= float(slept) <= 4.5, slept
    # And only the injected failure cost an attempt (the wait did not)
    assert p.job(job_id)["attempts"] == 2
