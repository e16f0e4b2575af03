"""Priority reaches the broker: with a backlog, 9 runs first and 0 last.

The backlog is published before any worker consumes it, to a queue of its own
("test-priority") so the session's in-process worker cannot take part. The
worker that drains it is a real `celery worker` process with one slot and a
prefetch of one, so it takes the messages one at a time in broker order.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.engine import pg
from tasks.engine.dispatch import dispatch
from tests.integration.jobdb import new_job, tuple_row, tuples, wait_until

QUEUE = "test-priority"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def priority_worker(tmp_path: Path):
    """Start a one-slot worker on QUEUE when called; stopped (SIGTERM, by pid) at teardown."""
    procs: list[tuple[subprocess.Popen, Path]] = []

    def start() -> subprocess.Popen:
        log = tmp_path / "worker.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "tasks.celery_app", "worker",
                 "-Q", QUEUE, "-n", f"priority-{os.getpid()}@%h", "-l", "WARNING",
                 "--pool", "solo", "--concurrency", "1", "--prefetch-multiplier", "1",
                 "--without-heartbeat", "--without-mingle", "--without-gossip"],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            )
        procs.append((proc, log))
        return proc

    yield start
    for proc, log in procs:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            print(log.read_text(errors="replace"))
            raise


@pytest.mark.skipif(os.environ.get("SWITCHYARD_AMQP_QUEUE_TYPE") == "quorum",
                    reason="RabbitMQ 3.x quorum queues keep no priority levels (README)")
def test_backlog_runs_most_urgent_first(project, priority_worker):
    # Given a backlog published in an order unrelated to priority, nobody consuming yet
    # (two jobs at priority 5 show that equal priorities keep their publish order)
    priorities = [3, 0, 9, 5, 7, 1, 5, 8, 2]
    published: list[tuple[str, int]] = []
    for p in priorities:
        job_id = new_job(project, payload={"steps": 1}, priority=p, publish=False)
        pg.execute("UPDATE agent_jobs SET queue = %s WHERE id = %s", (QUEUE, job_id))
        dispatch(job_id, QUEUE, p)
        published.append((str(job_id), p))

    # When a worker with one slot and a prefetch of one drains it
    proc = priority_worker()

    def all_done() -> bool:
        assert proc.poll() is None, "the priority worker exited"
        left = tuple_row("SELECT count(*) FROM agent_jobs WHERE project_id = %s "
                         "AND status <> 'completed'", (project,))[0]
        return left == 0

    wait_until(all_done, timeout=30, what="the backlog to drain")

    # Then the claims (running events, in commit order) follow priority, 9 first
    rows = tuples("SELECT e.job_id::text, j.priority FROM agent_job_events e "
                  "JOIN agent_jobs j ON j.id = e.job_id "
                  "WHERE e.project_id = %s AND e.type = 'status' AND e.message = 'running' "
                  "ORDER BY e.id", (project,))
    assert [p for _, p in rows] == [9, 8, 7, 5, 5, 3, 2, 1, 0]
    fives = [job_id for job_id, p in published if p == 5]
    assert [job_id for job_id, p in rows if p == 5] == fives, "FIFO within a priority"
