"""Enqueue against real PostgreSQL: idempotency under a thundering herd, validation, events."""

from __future__ import annotations

import uuid

import pytest

from tasks.engine import pg
from tasks.engine.enqueue import Enqueued, EnqueueRequest, ProjectNotFound, enqueue
from tasks.engine.errors import InvalidPayload, UnknownJobType
from tests.integration.jobdb import in_threads, job, status_history, tuples


def test_64_concurrent_enqueues_with_one_key_make_one_job(project):
    # Given 64 threads, each with its own connection, enqueueing the same key at once
    def enqueue_same_key(i: int):
        return enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                      payload={"steps": 1}, idempotency_key="herd:1"),
                       publish=False)

    # When they all race
    results = in_threads(64, enqueue_same_key)

    # Then exactly one row exists, everyone got its id, and exactly one created it
    rows = tuples("SELECT id FROM agent_jobs WHERE project_id = %s", (project,))
    assert len(rows) == 1
    assert {r.job_id for r in results} == {rows[0][0]}
    assert sum(r.created for r in results) == 1
    assert {r.status for r in results} == {"queued"}
    assert status_history(rows[0][0]) == ["queued"], "one 'queued' event, not one per caller"


def test_same_key_later_returns_the_first_job_in_its_current_status(project):
    first = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                   idempotency_key="chat:1"), publish=False)
    pg.execute("UPDATE agent_jobs SET status = 'canceled' WHERE id = %s", (first.job_id,))
    again = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                   payload={"steps": 9}, idempotency_key="chat:1"), publish=False)
    assert (again.job_id, again.status, again.created) == (first.job_id, "canceled", False)
    assert job(first.job_id)["payload"]["steps"] == 3, "the second payload is ignored"


def test_the_same_key_in_two_projects_makes_two_jobs(owner_and_project):
    owner, project = owner_and_project
    other = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'other')", (other, owner))
    a = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                               idempotency_key="k"), publish=False)
    b = enqueue(EnqueueRequest(project_id=other, job_type="system.canary",
                               idempotency_key="k"), publish=False)
    assert a.created and b.created and a.job_id != b.job_id


def test_enqueue_stores_defaults_and_options(project):
    done = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                  payload={"steps": 2}, priority=8, max_attempts=7,
                                  concurrency_key="c", concurrency_limit=3, timeout_seconds=30),
                   publish=False)
    row = job(done.job_id)
    assert row["payload"] == {"steps": 2, "step_seconds": 0.0, "fail_first_attempts": 0,
                              "sleep_seconds": 0.0, "children": 0}
    assert (row["priority"], row["max_attempts"], row["concurrency_key"],
            row["concurrency_limit"], row["timeout_seconds"]) == (8, 7, "c", 3, 30)
    assert (row["status"], row["attempts"], row["queue"]) == ("queued", 0, "default")
    assert row["idempotency_key"].startswith("auto:")


@pytest.mark.parametrize(
    ("req", "error", "match"),
    [
        pytest.param({"job_type": "nope.nothing"}, UnknownJobType, "nope.nothing",
                     id="unknown job type"),
        pytest.param({"payload": {"steps": 0}}, InvalidPayload, "steps",
                     id="payload fails its model"),
        pytest.param({"payload": {"surprise": 1}}, InvalidPayload, "surprise",
                     id="unknown payload field on a strict model"),
        pytest.param({"priority": 10}, InvalidPayload, "priority", id="priority above 9"),
        pytest.param({"max_attempts": 0}, InvalidPayload, "max_attempts",
                     id="max_attempts below 1"),
        pytest.param({"concurrency_limit": 0}, InvalidPayload, "concurrency_limit",
                     id="concurrency_limit below 1"),
        pytest.param({"job_type": "test.sleeper", "payload": {"seconds": float("nan")}},
                     InvalidPayload, "payload", id="a NaN jsonb cannot store (from a spawn)"),
        pytest.param({"job_type": "test.sleeper", "payload": {"seconds": float("inf")}},
                     InvalidPayload, "payload", id="an infinity jsonb cannot store"),
    ],
)
def test_enqueue_rejects_bad_requests_and_writes_nothing(project, req, error, match):
    fields = {"project_id": project, "job_type": "system.canary"} | req
    with pytest.raises(error, match=match):
        enqueue(EnqueueRequest(**fields), publish=False)
    assert tuples("SELECT count(*) FROM agent_jobs")[0][0] == 0


def test_enqueue_into_a_missing_project_is_refused(db):
    with pytest.raises(ProjectNotFound):
        enqueue(EnqueueRequest(project_id=uuid.uuid4(), job_type="system.canary"), publish=False)


def test_a_run_after_already_past_is_stored_as_the_enqueues_own_time(project):
    # A held-back job's place in its owner's order is its due time (tasks.engine.fair): a
    # client naming last year must not go before the jobs it enqueued before this one.
    from datetime import UTC, datetime

    from tasks.engine.enqueue import enqueue_many

    past = datetime(2020, 1, 1, tzinfo=UTC)
    one = enqueue(EnqueueRequest(project_id=project, job_type="system.canary", run_after=past),
                  publish=False)
    (many,) = enqueue_many([EnqueueRequest(project_id=project, job_type="system.canary",
                                           run_after=past)])
    assert isinstance(many, Enqueued), many
    for job_id in (one.job_id, many.job_id):
        row = pg.fetch_one_dict("SELECT run_after, created_at FROM agent_jobs WHERE id = %s",
                                (job_id,))
        assert row is not None and row["run_after"] == row["created_at"]
