"""SIGTERM on a busy worker: it stops within the grace period and gives its work back."""

from __future__ import annotations

import time

import pytest

from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.settings import get_settings
from tests.e2e import procs as p
from tests.integration.jobdb import tuples

pytestmark = pytest.mark.e2e


def _canary(project: str, steps: int, seconds: float):
    return enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                  payload={"steps": steps, "step_seconds": seconds})).job_id


@pytest.mark.parametrize("pool, concurrency", [
    pytest.param("solo", 1, id="solo: the job runs in the worker's main thread"),
    pytest.param("threads", 2, id="threads: jobs run in pool threads"),
    pytest.param("prefork", 2, id="prefork: jobs run in child processes"),
])
def test_sigterm_gives_running_and_prefetched_jobs_back(
        procs: p.Procs, project: str, pool: str, concurrency: int) -> None:
    # Given a worker busy with long canaries (20 steps x 0.5 s) on every slot
    a = procs.worker("a", pool=pool, concurrency=concurrency)
    long_ids = [_canary(project, 20, 0.5) for _ in range(concurrency)]
    procs.wait(lambda: all(max(p.steps(j), default=0) >= 2 for j in long_ids), 20,
               "every long canary at step 2")
    # And more jobs waiting behind them, in the broker or prefetched by the worker
    short_ids = [_canary(project, 1, 0) for _ in range(6)]
    time.sleep(0.5)

    # When the worker gets SIGTERM
    t0 = time.monotonic()
    a.signal(15)
    # Then it exits within the grace period plus a few seconds
    grace = get_settings().shutdown_grace_seconds
    procs.wait(lambda: not a.alive(), grace + 6, "worker a to exit after SIGTERM")
    took = time.monotonic() - t0
    assert took < grace + 6, took
    assert a.popen.returncode == 0, a.tail()

    # And the long jobs were handed back, queued again, with the give-back on record
    for j in long_ids:
        assert p.status(j) == "queued", p.job(j)
        back = [e for e in p.status_events(j) if e["status"] == "queued" and e["from"] == "running"]
        assert back, p.status_events(j)
    done_before = {j: {s for s, st in p.steps(j).items() if st == "completed"} for j in long_ids}
    assert all(done_before.values()), done_before
    short_done_by_a = [j for j in short_ids if p.status(j) == "completed"]
    assert not [j for j in short_ids if p.status(j) == "running"]

    # When a second worker (and a beat) come up
    b = procs.worker("b", pool="threads", concurrency=4)
    procs.beat("beat")

    # Then every job completes, the long ones on the new worker
    everything = long_ids + short_ids
    procs.wait(lambda: all(p.status(j) == "completed" for j in everything), 30,
               "every job completed")
    for j in long_ids:
        assert p.job(j)["locked_by"].endswith(f":{b.pid}")
        started = p.started_counts(j)
        assert set(started) == set(range(1, 21))
        # And no step ran twice: the job was handed back at a step boundary, with the
        # step that finished during the grace period recorded as completed
        assert all(started[s] == 1 for s in done_before[j]), started
        assert set(started.values()) == {1}, started
    # Nothing ran twice: one completed attempt per job
    counts = tuples("SELECT count(*) FROM agent_job_events WHERE job_id = ANY(%s) "
                    "AND type = 'status' AND data->>'status' = 'completed'",
                    ([str(j) for j in everything],))[0][0]
    assert counts == len(everything)
    print(f"{pool}: exit after SIGTERM took {took:.1f}s; short jobs done by a: "
          f"{len(short_done_by_a)}")


def test_a_prefork_worker_releases_a_child_s_job_stuck_in_a_long_step_at_exit(
        procs: p.Procs, project: str) -> None:
    # Given a prefork worker whose child is inside a step longer than the grace period
    a = procs.worker("a", pool="prefork", concurrency=1)
    job_id = _canary(project, 2, 30)
    procs.wait(lambda: p.steps(job_id).get(1) == "running", 20, "step 1 running")
    # When the worker gets SIGTERM, and after the grace period the orchestrator's second
    # signal (a cold shutdown, which terminates the pool's children), and exits
    # (no beat runs: no sweep can help)
    a.signal(15)
    time.sleep(get_settings().shutdown_grace_seconds + 1)
    a.signal(3)
    procs.wait(lambda: not a.alive(), 15, "worker exit")
    # Then the parent gave the child's job back on its way out, costing no attempt
    row = p.job(job_id)
    assert (row["status"], row["attempts"]) == ("queued", 0), row
    assert p.status_events(job_id)[-1] == {"status": "queued", "from": "running",
                                           "reason": "worker shutdown"}


@pytest.mark.parametrize("pool", ["threads", "solo"])
def test_a_step_longer_than_the_grace_period_is_handed_back_without_a_second_signal(
        procs: p.Procs, project: str, pool: str) -> None:
    # Given a worker inside a step far longer than the grace period (a long command, a slow
    # model call); a thread pool's cold shutdown would wait for it
    a = procs.worker("a", pool=pool, concurrency=1)
    job_id = _canary(project, 2, 60)
    procs.wait(lambda: p.steps(job_id).get(1) == "running", 20, "step 1 running")
    # When it gets SIGTERM and nothing else (Ctrl-C at up, which kills at grace + 10 s)
    a.signal(15)
    grace = get_settings().shutdown_grace_seconds
    procs.wait(lambda: not a.alive(), grace + 8, "worker a to exit by itself")
    # Then it gave the job back on its way out, costing no attempt (the stale sweep would
    # have charged one)
    row = p.job(job_id)
    assert (row["status"], row["attempts"]) == ("queued", 0), row
    assert p.status_events(job_id)[-1] == {"status": "queued", "from": "running",
                                           "reason": "worker shutdown"}
    assert "handed back mid-step" in a.text()
    # And a worker that comes up next takes it at once: the hand-back sent its wake-up (no
    # beat runs here, so no dispatch sweep could). Not on RabbitMQ with a solo worker: it
    # consumes without acks, so the broker pushes the wake-up to the exiting worker itself,
    # which takes it into its grave; the dispatch sweep re-sends it there.
    if pool == "solo" and not get_settings().broker_url.startswith(("redis://", "rediss://")):
        return
    b = procs.worker("b", pool=pool, concurrency=1)
    procs.wait(lambda: p.job(job_id)["locked_by"].endswith(f":{b.pid}"), 20,
               "worker b to take the job handed back")
