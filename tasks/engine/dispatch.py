"""Publishing wake-ups: `tasks.run_job(job_id)` on the job's queue with its priority.

Always called after the commit that made the job runnable; a wake-up that is
lost (broker down, process killed in between) is re-sent by the dispatch sweep.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import redis.exceptions
from kombu.exceptions import OperationalError

from tasks.celery_app import RUN_JOB, app
from tasks.engine import redis_wakeup
from tasks.engine.queues import broker_priority
from tasks.settings import get_settings

log = logging.getLogger(__name__)


def _direct() -> bool:
    """Due wake-ups go straight onto a Redis broker (tasks.engine.redis_wakeup)."""
    return get_settings().broker_url.startswith(("redis://", "rediss://"))


def unreachable(exc: BaseException) -> bool:
    """Whether `exc` says the broker could not be reached (down, refused, timed out)."""
    return isinstance(exc, (OperationalError, OSError, redis.exceptions.ConnectionError,
                            redis.exceptions.TimeoutError))


def _send_direct(wakeups: list[redis_wakeup.Wakeup]) -> bool:
    """True if sent; False (after forgetting the publisher) to send through Celery instead.

    A fresh connection that cannot reach the broker raises: Celery's would not either. A
    pipeline cut midway may have delivered some of its wake-ups before the fallback sends
    them all again: a second wake-up of a job is a duplicate delivery, which the claim
    drops (no row matches), so nothing runs twice."""
    try:
        sender = redis_wakeup.publisher(app, RUN_JOB)
    except Exception as exc:
        if unreachable(exc):
            raise
        log.info("direct publisher failed; sending through Celery",
                 extra={"action": "publish_fallback"}, exc_info=True)
        return False
    try:
        sender.send(wakeups)
        return True
    except Exception as exc:
        # A connection kept from before (Redis restarted, a socket cut): Celery's pool
        # connects anew.
        log.info("direct publish failed (%s); sending through Celery", type(exc).__name__,
                 extra={"action": "publish_fallback"}, exc_info=not unreachable(exc))
        redis_wakeup.forget()
        return False


def _publish_failed(exc: Exception, what: str, **extra: str) -> None:
    """One line for a broker that is down (the operator's fix is the broker, not the code);
    a traceback for anything else."""
    if unreachable(exc):
        log.warning("publish failed, the broker is unreachable (%s); the dispatch sweep will "
                    "re-send %s", exc, what, extra={"action": "publish_failed", **extra})
    else:
        log.warning("publish failed; the dispatch sweep will re-send %s", what,
                    extra={"action": "publish_failed", **extra}, exc_info=True)


def dispatch(job_id: uuid.UUID | str, queue: str, priority: int,
             countdown: float | None = None, producer: Any = None) -> None:
    broker_pri = broker_priority(priority, get_settings().broker_url)
    due = not (countdown and countdown > 0)
    if due and producer is None and _direct() and \
            _send_direct([(str(job_id), queue, broker_pri)]):
        return
    app.send_task(
        RUN_JOB, args=(str(job_id),), queue=queue, routing_key=queue, priority=broker_pri,
        countdown=None if due else countdown, producer=producer,
    )


def dispatch_quietly(job_id: uuid.UUID | str, queue: str, priority: int,
                     countdown: float | None = None) -> bool:
    """Publish, but never fail the caller: the job row is committed and the sweep will re-send."""
    try:
        dispatch(job_id, queue, priority, countdown)
        return True
    except Exception as exc:
        _publish_failed(exc, "it", job_id=str(job_id))
        return False


def dispatch_many(wakeups: list[tuple[uuid.UUID | str, str, int]]) -> int:
    """Publish many wake-ups over one producer (one broker connection); never fails the
    caller: a wake-up not sent is the dispatch sweep's. Returns how many went out."""
    if not wakeups:
        return 0
    url = get_settings().broker_url
    sent = 0
    try:
        if _direct() and _send_direct([(str(job_id), queue, broker_priority(priority, url))
                                       for job_id, queue, priority in wakeups]):
            return len(wakeups)
        with app.producer_or_acquire() as producer:
            for job_id, queue, priority in wakeups:
                dispatch(job_id, queue, priority, producer=producer)
                sent += 1
    except Exception as exc:
        _publish_failed(exc, f"{len(wakeups) - sent} wake-ups")
    return sent


def broker_depth(queue: str) -> int:
    """Messages waiting in the broker's `queue`, declaring it (and its binding) first.

    Declaring matters after a wipe: a flushed Redis loses the exchange bindings too,
    and kombu drops a message published to an unbound exchange.
    """
    with app.connection_for_write() as conn:
        bound = app.amqp.queues[queue](conn.default_channel)
        bound.exchange.declare()
        declared = bound.queue_declare()
        bound.queue_bind()
        return int(declared.message_count) if declared is not None else 0
