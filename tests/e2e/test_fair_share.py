"""A fair share of the workers: one owner's backlog cannot hold back another owner's job
(SWITCHYARD_OWNER_MAX_ACTIVE jobs of an owner are published or running at once; the rest
wait in PostgreSQL), and a client's priority orders its own work only."""

from __future__ import annotations

import uuid

import pytest

from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.e2e import procs as p
from tests.integration.jobdb import tuple_row

pytestmark = pytest.mark.e2e


def new_owner_project(name: str) -> str:
    owner, project = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, f"{name}-{owner[:8]}"))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, %s)",
               (project, owner, name))
    return project


def canary(project: str, priority: int | None = None, seconds: float = 0.1) -> str:
    return str(enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                      payload={"steps": 1, "step_seconds": seconds},
                                      priority=priority)).job_id)


def published(project: str) -> int:
    return int(pg.fetch_value("SELECT count(*) AS n FROM agent_jobs WHERE project_id = %s "
                              "AND dispatched_at IS NOT NULL", (project,)))


def test_one_owners_backlog_does_not_hold_back_anothers_job(procs: p.Procs, db: None) -> None:
    # Given owner A's 600 short jobs queued (0.1 s each: half a minute of work for two
    # threads), and one worker with two threads working on them
    a, b = new_owner_project("owner-a"), new_owner_project("owner-b")
    backlog = [canary(a) for _ in range(600)]
    assert published(a) == 16  # the rest wait in PostgreSQL, unpublished
    procs.worker("w", pool="threads", concurrency=2)
    procs.wait(lambda: p.status(backlog[20]) == "completed", 60, "A's backlog under way")
    # When owner B enqueues one job
    job_b = canary(b)
    procs.wait(lambda: p.status(job_b) == "completed", 30, "B's job done")
    # Then it started within 3 s, while most of A's backlog was still waiting
    (waited,) = tuple_row("SELECT extract(epoch FROM started_at - created_at)::float8 "
                          "FROM agent_jobs WHERE id = %s", (job_b,))
    left = int(pg.fetch_value("SELECT count(*) AS n FROM agent_jobs WHERE project_id = %s "
                              "AND (started_at IS NULL OR started_at > (SELECT started_at "
                              "FROM agent_jobs WHERE id = %s))", (a, job_b)))
    print(f"owner B's job waited {waited:.2f} s; {left} of A's jobs started after it")
    assert waited < 3.0
    assert left > 300
    # And A's backlog goes on being published as its jobs end, never more than 16 at once
    procs.wait(lambda: p.status(backlog[100]) == "completed", 60, "A's backlog going on")
    assert int(pg.fetch_value("SELECT count(*) AS n FROM agent_jobs WHERE project_id = %s "
                              "AND status IN ('queued', 'running') "
                              "AND dispatched_at IS NOT NULL", (a,))) <= 16


def test_priority_is_capped_and_orders_an_owners_own_work(db: None, monkeypatch) -> None:
    from tasks.settings import get_settings

    monkeypatch.setenv("SWITCHYARD_MAX_PRIORITY", "5")
    get_settings.cache_clear()
    try:
        project = new_owner_project("owner-c")
        job = canary(project, priority=9)
        assert tuple_row("SELECT priority FROM agent_jobs WHERE id = %s", (job,)) == (5,)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
