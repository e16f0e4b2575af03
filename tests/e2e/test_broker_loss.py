"""The broker is disposable: wipe it with jobs queued and every job still runs."""

from __future__ import annotations

import os

import pytest
import redis

from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.e2e import procs as p
from tests.integration.jobdb import tuples
from tests.support import broker

pytestmark = pytest.mark.e2e


def test_flushing_the_broker_with_20_jobs_queued_loses_none(procs: p.Procs, project: str) -> None:
    # Given 20 canaries enqueued while no worker runs, the wake-ups of as many as their owner
    # may have out at once (SWITCHYARD_OWNER_MAX_ACTIVE, 16) in the broker, the rest in
    # PostgreSQL
    ids = [enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                  payload={"steps": 2, "step_seconds": 0})).job_id
           for _ in range(20)]
    assert broker.waiting("default") == 16

    # When the broker loses every message
    broker.wipe()
    assert broker.waiting("default") == 0

    # And a worker and a beat start
    procs.worker("w", pool="threads", concurrency=4)
    procs.beat("beat")

    # Then the dispatch sweep re-publishes them (after SWITCHYARD_REDISPATCH_AFTER_SECONDS)
    # and all 20 complete, each exactly once
    def statuses() -> dict[str, int]:
        return dict(tuples("SELECT status, count(*) FROM agent_jobs WHERE id = ANY(%s) "
                           "GROUP BY 1", ([str(i) for i in ids],)))

    procs.wait(lambda: statuses() == {"completed": 20}, 30, "all 20 jobs completed")
    attempts = tuples("SELECT attempts, count(*) FROM agent_jobs GROUP BY 1")
    assert attempts == [(1, 20)]
    started = tuples("SELECT sum(attempts) FROM job_steps")[0][0]
    assert started == 40
    redispatched = tuples("SELECT coalesce(sum((stats->>'rows')::int), 0) FROM sweep_runs "
                          "WHERE sweep IN ('dispatch_due', 'redispatch_lost')")[0][0]
    assert redispatched >= 16


@pytest.mark.skipif(not broker.is_redis(), reason="reads Redis's unacked hash")
def test_a_solo_worker_consumes_without_acks_and_a_wakeup_lost_with_it_is_sent_again(
        procs: p.Procs, project: str) -> None:
    # Given a solo worker (it runs one job at a time, in the thread that fetched it: broker
    # acks would only add two Redis round trips per job, issue 26) running a slow canary
    r = redis.Redis.from_url(os.environ["BROKER_URL"])
    worker = procs.worker("solo")
    slow = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                  payload={"steps": 1, "step_seconds": 5})).job_id
    procs.wait(lambda: tuples("SELECT status FROM agent_jobs WHERE id = %s", (slow,))[0][0]
               == "running", 15, "the slow canary running")
    # Then the broker keeps no unacknowledged copy of its wake-up
    assert r.hlen("unacked") == 0
    # And when the worker dies holding a wake-up it fetched but never started (the
    # queued job's wake-up, fetched into a process that is killed: here, taken off the
    # queue by hand, as the dead process would have)
    quick = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                   payload={"steps": 1})).job_id
    procs.wait(lambda: broker.waiting("default") == 1, 5, "the quick canary's wake-up queued")
    for key in r.scan_iter("default*"):
        if r.type(key) == b"list":
            r.delete(key)
    os.killpg(worker.pid, 9)
    # Then a new worker and the dispatch sweep run it all the same: the slow one reclaimed
    # once its heartbeat is stale, the quick one re-sent once its wake-up is overdue
    procs.worker("solo2")
    procs.beat("beat")
    procs.wait(lambda: tuples("SELECT count(*) FROM agent_jobs WHERE id = ANY(%s) AND "
                              "status = 'completed'", ([str(slow), str(quick)],))[0][0] == 2,
               90, "both canaries completed")
    assert tuples("SELECT attempts FROM agent_jobs WHERE id = %s", (quick,))[0][0] == 1
