"""Wake-ups written straight onto Redis (tasks.engine.redis_wakeup): the message is the one
Celery sends, field by field, on the list kombu reads for its priority; a real worker runs
the job it wakes; many go out together; and any failure falls back to Celery's send_task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tasks.celery_app import RUN_JOB, app
from tasks.engine import dispatch as dispatch_module
from tasks.engine import redis_wakeup
from tasks.engine.dispatch import broker_depth, dispatch, dispatch_many
from tasks.engine.queues import broker_priority
from tasks.settings import get_settings
from tests.conftest import wait_until

pytestmark = pytest.mark.skipif(not get_settings().broker_url.startswith("redis"),
                                reason="the Redis broker only")


@pytest.fixture
def queue():
    name = f"wakeup-test-{uuid.uuid4().hex[:8]}"  # no worker consumes it
    yield name
    with app.connection_for_write() as conn:
        conn.default_channel.queue_delete(name)


def _stored(queue: str) -> list[tuple[str, dict]]:
    """(list key, envelope) of every message waiting in `queue`, any priority level."""
    with app.connection_for_read() as conn:
        client = conn.default_channel.client
        return [(key.decode(), json.loads(raw)) for key in client.scan_iter(f"{queue}*")
                if client.type(key) == b"list" for raw in client.lrange(key, 0, -1)]


@pytest.fixture
def through_celery(monkeypatch) -> list[tuple]:
    """What reaches Celery's send_task instead of being sent (a publish inside dispatch_quietly
    would swallow an exception raised here, so calls are recorded and asserted on)."""
    calls: list[tuple] = []
    monkeypatch.setattr(app, "send_task", lambda *a, **kw: calls.append((a, kw)))
    return calls


@pytest.mark.parametrize("priority", [0, 5, 9])
def test_the_message_is_the_one_celery_sends(queue, monkeypatch, priority) -> None:
    job_id = str(uuid.uuid4())
    pri = broker_priority(priority, get_settings().broker_url)
    app.send_task(RUN_JOB, args=(job_id,), queue=queue, routing_key=queue, priority=pri)
    [(celery_key, celery_sent)] = _stored(queue)
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)

    celery_calls: list = []
    monkeypatch.setattr(app, "send_task", lambda *a, **kw: celery_calls.append(a))
    dispatch(job_id, queue, priority)
    assert celery_calls == []
    [(key, sent)] = _stored(queue)

    assert key == celery_key  # the same priority level's list
    for ids in (celery_sent, sent):  # fresh per message on both sides
        task_id = ids["headers"]["id"]
        assert ids["headers"]["root_id"] == ids["properties"]["correlation_id"] == task_id
        uuid.UUID(ids["properties"].pop("delivery_tag"))
        for where, field in (("headers", "id"), ("headers", "root_id"),
                             ("properties", "correlation_id")):
            ids[where][field] = "<task id>"
    assert sent == celery_sent


def test_a_real_worker_runs_the_job_it_wakes(worker, project, through_celery) -> None:
    import tasks.catalog  # noqa: F401 - registers every job type
    from tasks.engine import pg
    from tasks.engine.enqueue import EnqueueRequest, enqueue

    job = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                 payload={"steps": 2}))
    wait_until(lambda: pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s",
                                      (job.job_id,)) == "completed", what="the canary")
    assert through_celery == []


def test_many_go_out_together_and_arrive(queue, through_celery) -> None:
    assert dispatch_many([(uuid.uuid4(), queue, p) for p in (1, 5, 5, 9)]) == 4
    assert broker_depth(queue) == 4
    assert sorted(e["properties"]["priority"] for _k, e in _stored(queue)) == [0, 4, 4, 8]
    assert through_celery == []


def test_a_failed_direct_publish_goes_through_celery(queue, monkeypatch) -> None:
    class Broken:
        def send(self, _wakeups):
            raise ConnectionError("redis went away")

    monkeypatch.setattr(redis_wakeup, "publisher", lambda *_: Broken())
    dispatch(uuid.uuid4(), queue, 5)
    assert dispatch_many([(uuid.uuid4(), queue, 5), (uuid.uuid4(), queue, 5)]) == 2
    assert broker_depth(queue) == 3


def test_a_countdown_goes_through_celery(queue, monkeypatch) -> None:
    sent = []
    monkeypatch.setattr(dispatch_module.redis_wakeup, "publisher",
                        lambda *_: pytest.fail("an ETA cannot go straight onto the list"))
    real = app.send_task
    monkeypatch.setattr(app, "send_task", lambda *a, **kw: sent.append(kw) or real(*a, **kw))
    dispatch(uuid.uuid4(), queue, 5, countdown=30)
    assert sent and sent[0]["countdown"] == 30


def test_a_broker_that_is_down_costs_an_enqueue_one_line_not_seconds(tmp_path) -> None:
    # The web's enqueue with Redis down: the job row is committed and the dispatch sweep
    # re-sends, so the publish must give up at once, saying so in one line. It used to
    # retry the connection for ~6 s per request and log four tracebacks.
    script = (
        "import logging, sys, time, uuid\n"
        "logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
        "from tasks.engine.dispatch import dispatch_quietly, dispatch_many\n"
        "t = time.monotonic()\n"
        "print(dispatch_quietly(uuid.uuid4(), 'default', 5),\n"
        "      dispatch_many([(uuid.uuid4(), 'default', 5)]), time.monotonic() - t)\n")
    env = {**os.environ, "BROKER_URL": "redis://127.0.0.1:1/0"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    sent_one, sent_many, seconds = done.stdout.split()
    assert (sent_one, sent_many) == ("False", "0"), done.stderr
    assert float(seconds) < 3.0, done.stderr  # both calls; it was 6-7 s each
    assert "Traceback" not in done.stderr, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 2 and all("dispatch sweep will re-send" in w for w in warnings), \
        done.stderr
    assert "127.0.0.1:1" in done.stderr  # says which broker it could not reach
