"""The test broker by its own protocol: Redis (the default) or AMQP (the RabbitMQ pass of
.ci/run), both through kombu, so a test that wipes or counts wake-ups runs on either."""

from __future__ import annotations

import os

PARKED = "test-parked"  # a queue no worker consumes (tests.integration.jobdb.park)


def is_redis() -> bool:
    return os.environ.get("BROKER_URL", "redis://").startswith(("redis://", "rediss://", "unix://"))


def _queue_names() -> tuple[str, ...]:
    from tasks.engine.queues import QUEUES

    return (*QUEUES, PARKED)


def waiting(queue: str = "default") -> int:
    """Wake-ups waiting in `queue` (every priority level), not counting fetched ones."""
    from tasks.celery_app import app

    with app.connection_for_read() as conn:
        q = app.amqp.queues[queue](conn.default_channel)
        if is_redis():  # one list per priority level (celeryconfig's priority_steps)
            client = conn.default_channel.client
            return sum(client.llen(k) for k in client.scan_iter(f"{queue}*")
                       if client.type(k) == b"list")
        _name, count, _consumers = q.queue_declare(passive=True)
        return int(count)


def wipe() -> None:
    """Lose every message: Redis's whole database number (the unacked hash too), or every
    engine queue's ready messages on AMQP (what a broker restart without persistence does)."""
    from tasks.celery_app import app

    with app.connection_for_write() as conn:
        if is_redis():
            conn.default_channel.client.flushdb()
            return
        for name in _queue_names():
            q = app.amqp.queues[name](conn.default_channel)
            q.declare()
            q.purge()
