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
import uuid
from typing import Any

from tasks.engine import pg
from tasks.engine.errors import CancelRequested, JobInterrupt, LostOwnership
from tasks.engine.sql import MOVED_COLUMNS, keyed_status, lit, status_event
from tasks.engine.status import JobStatus, guard
from tasks.settings import get_settings

log = logging.getLogger(__name__)

_state = {"pid": 0, "worker": "", "queues": []}
# When shutdown was requested (time.monotonic(); 0.0 = not yet), in memory shared
# with forked children: Celery tells only a prefork pool's parent about SIGTERM,
# but the jobs run in its children, which must see it to hand them back in time.
_shutdown_at = mmap.mmap(-1, 8)
_stop = threading.Event()
_lock = threading.Lock()


def worker_id() -> str:
    """hostname:pid of the worker's main process; `locked_by` on every job it runs.

    A prefork pool's children inherit their parent's id (pinned by `pin_worker_id`
    before the pool forks), so the parent's release at shutdown finds their jobs.
    """
    if _state.get("pinned"):
        return str(_state["worker"])
    if _state["pid"] != os.getpid():
        _state["pid"], _state["worker"] = os.getpid(), f"{socket.gethostname()}:{os.getpid()}"
    return str(_state["worker"])


def pin_worker_id() -> None:
    """Called in the worker's main process before its pool starts (Celery's worker_init)."""
    _state["pinned"] = False
    worker_id()
    _state["pinned"] = True


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


# The runs a thread of this process holds right now, by claim token: entered only
# after a claim succeeded and left when that run ends, so a duplicate delivery (which
# claims nothing) cannot touch a live run's heartbeat, and a run abandoned without its
# final write (the database stayed away) goes stale and is reclaimed.
_runs: dict[uuid.UUID, uuid.UUID] = {}  # claim token -> job id
# What the heartbeat found of a run it covers: asked to cancel, or no longer this run's
# (reclaimed, timed out, canceled by a sweep). A step waits on no checkpoint while inside
# one long call (a sandboxed test suite, a build), so such a call polls `interrupted()`.
_interrupts: dict[uuid.UUID, JobInterrupt] = {}  # claim token -> why to stop
_current = threading.local()  # the claim token of the run this thread executes


def holding(token: uuid.UUID, job_id: uuid.UUID) -> None:
    with _lock:
        _runs[token] = job_id
    _current.token = token


def holds_runs() -> bool:
    """Whether a thread of this process runs a job now."""
    with _lock:
        return bool(_runs)


def released(token: uuid.UUID) -> None:
    with _lock:
        _runs.pop(token, None)
        _interrupts.pop(token, None)
    if getattr(_current, "token", None) == token:
        _current.token = None


def interrupted() -> JobInterrupt | None:
    """Why this thread's run should stop now, as the last heartbeat found; None: go on.
    Cheap enough to call ten times a second."""
    token = getattr(_current, "token", None)
    return None if token is None else _interrupts.get(token)


HEARTBEAT = f"""
WITH beat AS (
    UPDATE agent_jobs j SET heartbeat_at = now()
    FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS r(id, token)
    WHERE j.id = r.id AND j.claim_token = r.token AND {keyed_status("j")} = 'running'
    RETURNING j.claim_token, j.cancel_requested
), worker AS (
    INSERT INTO worker_heartbeats (worker, hostname, pid, queues, running, last_seen_at)
    VALUES (%(worker)s, %(host)s, %(pid)s, %(queues)s::jsonb, (SELECT count(*) FROM beat),
            now())
    ON CONFLICT (worker) DO UPDATE SET last_seen_at = now(), running = EXCLUDED.running,
        queues = EXCLUDED.queues, stopped_at = NULL
)
SELECT claim_token, cancel_requested FROM beat
"""


def beat_once() -> None:
    with _lock:
        runs = list(_runs.items())
    rows = pg.fetch_dicts(HEARTBEAT, {"worker": worker_id(), "host": socket.gethostname(),
                                      "ids": [str(job) for _, job in runs],
                                      "tokens": [str(token) for token, _ in runs],
                                      "pid": os.getpid(),
                                      "queues": json.dumps(_state["queues"])})
    _note_interrupts(runs, {row["claim_token"]: row["cancel_requested"] for row in rows})


def _note_interrupts(runs: list[tuple[uuid.UUID, uuid.UUID]],
                     beaten: dict[uuid.UUID, bool]) -> None:
    with _lock:
        for token, job_id in runs:
            if token not in _runs:
                continue  # ended since the heartbeat read it
            if token not in beaten:
                _interrupts[token] = LostOwnership(f"job {job_id} is no longer this run's")
            elif beaten[token]:
                _interrupts[token] = CancelRequested("cancel requested")


def _beat_forever() -> None:
    interval = get_settings().heartbeat_seconds
    wait, failing = interval, False
    while not _stop.wait(wait):
        try:
            beat_once()
            wait, failing = interval, False
        except Exception as exc:
            # Reconnect at once and keep trying every fraction of the interval: a live
            # job must not go stale because its worker lost the database for a moment.
            # A lost connection is one line (a restart is no bug); anything else its trace.
            lost = pg.is_connection_error(exc)
            log.warning("heartbeat failed (%s); retrying", pg.first_line(exc) if lost
                        else type(exc).__name__, extra={"action": "heartbeat_failed"},
                        exc_info=not (failing or lost))
            wait, failing = min(interval, 0.25), True


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
    RETURNING {MOVED_COLUMNS}
), steps AS (
    UPDATE job_steps SET status = 'failed', error = 'worker shut down', finished_at = now()
    WHERE job_id IN (SELECT id FROM released) AND status = 'running'
), ev AS ({status_event("released", lit("queued"), lit("running"), lit("worker shutdown"))}
), gone AS (
    UPDATE worker_heartbeats SET stopped_at = now(), running = 0 WHERE worker = %(worker)s
)
SELECT * FROM released
"""


def release_all() -> list[dict[str, Any]]:
    """At process exit: give every job this process still holds back to the queue.

    A hand-back is not a failure, so it gives the attempt back. The caller runs
    tasks.engine.control.after_transition on each row (this module sits below it).
    """
    stop_heartbeat()
    try:
        return pg.fetch_dicts(RELEASE, {"worker": worker_id()})
    except Exception:
        log.warning("could not release jobs at shutdown; the stale sweep will",
                    extra={"action": "release_failed"}, exc_info=True)
        return []
