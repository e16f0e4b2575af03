"""Claim ahead through a real `celery worker` with a threads pool, as `switchyard worker` runs:
a burst is claimed partly ahead, and every job is claimed once, runs once and completes."""

from __future__ import annotations

import re

import pytest

from tasks.engine.dispatch import dispatch_many
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.e2e import procs as p
from tests.integration.jobdb import tuples

pytestmark = pytest.mark.e2e

AHEAD = re.compile(r"claimed (\d+) ahead")


def test_a_burst_on_a_threads_worker_is_claimed_ahead_and_each_job_runs_once(
        procs: p.Procs, project: str) -> None:
    # Given a threads worker (4 threads, prefetch 4 a thread) with claim ahead on
    worker = procs.worker("w", pool="threads", concurrency=4,
                          env={"SWITCHYARD_CLAIM_AHEAD": "16"})

    # When a burst of 200 jobs of one 50 ms step arrives at once
    ids = [str(enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                      payload={"steps": 1, "step_seconds": 0.05}),
                       publish=False).job_id) for _ in range(200)]
    dispatch_many([(i, "default", 5) for i in ids])

    def done() -> bool:
        return tuples("SELECT count(*) FROM agent_jobs WHERE id = ANY(%s) "
                      "AND status = 'completed'", (ids,))[0][0] == len(ids)

    procs.wait(done, 60, "every job to complete")

    # Then some were claimed ahead, and every job was claimed once and ran once
    ahead = sum(int(n) for n in AHEAD.findall(worker.text()))
    assert ahead > 0, worker.tail()
    rows = tuples("SELECT j.attempts, (SELECT count(*) FROM agent_job_events e "
                  "WHERE e.job_id = j.id AND e.data->>'status' = 'running'), "
                  "(SELECT attempts FROM job_steps s WHERE s.job_id = j.id) "
                  "FROM agent_jobs j WHERE j.id = ANY(%s)", (ids,))
    assert sorted(set(rows)) == [(1, 1, 1)], sorted(set(rows))
