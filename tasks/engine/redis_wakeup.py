"""Wake-ups written straight onto Redis: the message Celery would send, without its layers.

A wake-up is always the same message, `tasks.run_job(job_id)` on a queue with a priority.
Celery's `send_task` builds it through the app's routing, the task protocol, kombu's
producer, its `ensure` retry wrapper and `maybe_declare`: ~0.4 ms of CPU per publish, the
largest single part of the web's CPU per enqueue and of a worker's per job (the finish that
publishes the owner's next job). Here the same message is built directly and LPUSHed onto
the list kombu's Redis channel reads, with the channel's own client (its socket timeouts and
keepalives) and its own key for the priority level; many go in one pipeline.

Only for a wake-up that is due now on a redis:// or rediss:// broker; a countdown (an ETA
in the headers), other brokers, and any error here go through `send_task`, so the worst this
path can do is fall back. The message must stay what Celery sends:
tests/integration/test_redis_wakeup.py compares it with Celery's own, field by field, and the
integration suite's workers run every job from it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from celery import Celery
from celery.utils.nodenames import anon_nodename

Wakeup = tuple[str, str, int]  # (job id, queue, broker priority)
_BODY_TAIL = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def message(task: str, job_id: str, queue: str, priority: int, *, task_id: str, reply_to: str,
            origin: str, delivery_tag: str) -> dict[str, Any]:
    """The envelope kombu's Redis channel stores for `send_task(task, args=(job_id,))`
    (Celery's task protocol 2, JSON, the body base64 as kombu encodes it)."""
    body = json.dumps([[job_id], {}, _BODY_TAIL]).encode()
    headers: dict[str, Any] = {
        "lang": "py", "task": task, "id": task_id, "shadow": None, "eta": None,
        "expires": None, "group": None, "group_index": None, "retries": 0,
        "timelimit": [None, None], "root_id": task_id, "parent_id": None,
        "argsrepr": repr((job_id,)), "kwargsrepr": "{}", "origin": origin,
        # None, not False: send_task passes the unset option through as it is.
        "ignore_result": None, "replaced_task_nesting": 0, "stamped_headers": None,
        "stamps": {},
    }
    return {
        "body": base64.b64encode(body).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers,
        "properties": {
            "correlation_id": task_id, "reply_to": reply_to, "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue}, "priority": priority,
            "body_encoding": "base64", "delivery_tag": delivery_tag,
        },
    }


class RedisWakeups:
    """One process's publisher: kombu's channel for the key and client, built once."""

    def __init__(self, app: Celery, task: str) -> None:
        self.app, self.task = app, task
        # One attempt to connect: a broker that is down fails the publish at once (the
        # caller falls back, or leaves the wake-up to the dispatch sweep), where kombu's
        # default retries held a web request ~6 s.
        self.connection = app.connection_for_write(transport_options={"max_retries": 0})
        self.channel = self.connection.default_channel
        self.origin = anon_nodename()
        # Make the channel's pool and client now, under publisher()'s lock: threads that
        # raced to make them lazily would each make one.
        with self.channel.conn_or_acquire():
            pass

    def _entry(self, wakeup: Wakeup) -> tuple[str, str]:
        job_id, queue, priority = wakeup
        task_id = str(uuid.uuid4())
        body = message(self.task, job_id, queue, priority, task_id=task_id,
                       reply_to=self.app.thread_oid, origin=self.origin,
                       delivery_tag=str(uuid.uuid4()))
        return self.channel._q_for_pri(queue, priority), json.dumps(body)

    def send(self, wakeups: Sequence[Wakeup]) -> None:
        with self.channel.conn_or_acquire() as client:
            if len(wakeups) == 1:
                client.lpush(*self._entry(wakeups[0]))
                return
            with client.pipeline(transaction=False) as pipe:
                for wakeup in wakeups:
                    pipe.lpush(*self._entry(wakeup))
                pipe.execute()

    def close(self) -> None:
        self.connection.release()


_lock = threading.Lock()
_publisher: tuple[int, RedisWakeups] | None = None


def publisher(app: Celery, task: str) -> RedisWakeups:
    """This process's publisher (a forked child makes its own)."""
    global _publisher
    current = _publisher
    if current is not None and current[0] == os.getpid():
        return current[1]
    with _lock:
        if _publisher is None or _publisher[0] != os.getpid():
            _publisher = (os.getpid(), RedisWakeups(app, task))
        return _publisher[1]


def forget() -> None:
    """Drop this process's publisher (after an error: the next one reconnects)."""
    global _publisher
    with _lock:
        stale, _publisher = _publisher, None
    if stale is not None and stale[0] == os.getpid():
        # Closing a broken connection may fail too; it is gone either way.
        with contextlib.suppress(Exception):
            stale[1].close()
