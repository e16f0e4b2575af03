"""A worker process's life: its identity, its heartbeat, and its graceful shutdown.

The heartbeat is one statement per interval for all of the process's running
jobs (the stale-job sweep reads it), plus a row in `worker_heartbeats` for the
monitor. On SIGTERM the process stops claiming, lets running jobs go on for
SWITCHYARD_SHUTDOWN_GRACE_SECONDS, then hands them back at their next step
boundary; whatever is still locked when the process exits goes back to queued.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import socket
import struct
import threading
import time

from tasks import pg
from tasks.settings import get_settings
from tasks.status import JobStatus, guard

log = logging.getLogger(__name__)

_state = {"pid": 0, "worker": "", "queues": []}
# When shutdown was requested (time.monotonic(); 0.0 = not yet), in memory shared
# with forked children: Celery tells only a prefork pool's parent about SIGTERM,
# but the jobs run in its children, which must see it to hand them back in time.
_shutdown_at = mmap.mmap(-1, 8)
_stop = threading.Event()
_lock = threading.Lock()


def worker_id() -> str:
    """hostname:pid, unique per process; `locked_by` on every job this process runs."""
    if _state["pid"] != os.getpid():
        _state["pid"], _state["worker"] = os.getpid(), f"{socket.gethostname()}:{os.getpid()}"
    return str(_state["worker"])


def _requested_at() -> float | None:
    return struct.unpack_from("d", _shutdown_at)[0] or None


def request_shutdown() -> None:
    if _requested_at() is None:
        struct.pack_into("d", _shutdown_at, 0, time.monotonic())
        log.info("shutdown requested", extra={"action": "shutdown_requested"})


def shutting_down() -> bool:
    return _requested_at() is not None


def grace_expired() -> bool:
    at = _requested_at()
    return at is not None and time.monotonic() - at >= get_settings().shutdown_grace_seconds


# Only the jobs a thread of this process is running right now: a job whose run was
# abandoned (its final write failed, say) must go stale so the sweep can reclaim it.
_running: set[str] = set()


def running(job_id: str) -> None:
    with _lock:
        _running.add(str(job_id))


def done_running(job_id: str) -> None:
    with _lock:
        _running.discard(str(job_id))


HEARTBEAT = """
WITH beat AS (
    UPDATE agent_jobs SET heartbeat_at = now()
    WHERE id = ANY(%(ids)s::uuid[]) AND status = 'running' AND locked_by = %(worker)s
    RETURNING 1
)
INSERT INTO worker_heartbeats (worker, hostname, pid, queues, running, last_seen_at)
VALUES (%(worker)s, %(host)s, %(pid)s, %(queues)s::jsonb, (SELECT count(*) FROM beat), now())
ON CONFLICT (worker) DO UPDATE SET last_seen_at = now(), running = EXCLUDED.running,
    queues = EXCLUDED.queues, stopped_at = NULL
"""


def beat_once() -> None:
    with _lock:
        ids = sorted(_running)
    pg.fetch(HEARTBEAT, {"worker": worker_id(), "host": socket.gethostname(), "ids": ids,
                         "pid": os.getpid(), "queues": json.dumps(_state["queues"])})


def _beat_forever() -> None:
    interval = get_settings().heartbeat_seconds
    while not _stop.wait(interval):
        try:
            beat_once()
        except Exception:
            log.warning("heartbeat failed", extra={"action": "heartbeat_failed"}, exc_info=True)


def start_heartbeat(queues: list[str] | None = None) -> None:
    """Start this process's heartbeat thread once (safe to call on every task)."""
    with _lock:
        if queues is not None:
            _state["queues"] = sorted(queues)
        if _state.get("beating") == os.getpid():
            return
        _state["beating"] = os.getpid()
        _stop.clear()
    try:
        beat_once()
    except Exception:
        log.warning("first heartbeat failed", exc_info=True)
    threading.Thread(target=_beat_forever, name="switchyard-heartbeat", daemon=True).start()


def stop_heartbeat() -> None:
    _stop.set()
    _state["beating"] = 0


RELEASE = f"""
WITH released AS (
    UPDATE agent_jobs SET status = 'queued', attempts = attempts - 1, run_after = now(),
        dispatched_at = now(), updated_at = now()
    WHERE {guard(JobStatus.RUNNING, JobStatus.QUEUED)} AND locked_by = %(worker)s
    RETURNING id, project_id, queue, priority
), steps AS (
    UPDATE job_steps SET status = 'failed', error = 'worker shut down', finished_at = now()
    WHERE job_id IN (SELECT id FROM released) AND status = 'running'
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT id, project_id, 'status', 'queued',
           '{{"status": "queued", "from": "running", "reason": "worker shutdown"}}'::jsonb
    FROM released
), gone AS (
    UPDATE worker_heartbeats SET stopped_at = now(), running = 0 WHERE worker = %(worker)s
)
SELECT id, queue, priority FROM released
"""


def release_all() -> list[tuple]:
    """At process exit: give every job this process still holds back to the queue."""
    stop_heartbeat()
    try:
        return pg.fetch(RELEASE, {"worker": worker_id()})
    except Exception:
        log.warning("could not release jobs at shutdown; the stale sweep will",
                    extra={"action": "release_failed"}, exc_info=True)
        return []
