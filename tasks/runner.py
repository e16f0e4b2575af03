"""Run one delivery of `tasks.run_job(job_id)`: claim, run the handler, record the outcome."""

from __future__ import annotations

import logging
import uuid

import psycopg

from tasks import control, lifecycle, registry, store
from tasks.context import JobContext, describe_error, to_json
from tasks.dispatch import dispatch_quietly
from tasks.errors import (
    CancelRequested,
    LostOwnership,
    ShutdownRequested,
    Suspend,
    SwitchyardError,
)
from tasks.events import status_data
from tasks.retry import Fail, Retry, RetryPolicy, decide
from tasks.status import JobStatus

log = logging.getLogger(__name__)
S = JobStatus


def run_job(job_id: str) -> str:
    """Returns what became of the delivery, for logs and tests."""
    worker = lifecycle.worker_id()
    if lifecycle.shutting_down():
        # Stop claiming; the row is still queued, so hand the wake-up to another worker.
        row = store.peek_queue(job_id)
        if row is not None:
            dispatch_quietly(job_id, *row)
        return "deferred"
    lifecycle.start_heartbeat()
    # Heartbeats cover the job only while this call runs it: if it ends without its
    # final write (a database error, say), the job goes stale and the sweep reclaims it.
    lifecycle.running(job_id)
    try:
        return _claim_and_run(job_id, worker)
    finally:
        lifecycle.done_running(job_id)


def _claim_and_run(job_id: str, worker: str) -> str:
    job = store.claim(job_id, worker)
    if job is None:
        return "skipped"
    _log("job_claimed", job.id, attempt=job.attempt, job_type=job.job_type)
    ctx = JobContext(job, worker)
    if job.cancel_requested:
        # The first step after a claim does not check in before it runs (see
        # JobContext.step), so a cancel asked of an earlier attempt is honoured here.
        return _cancel(ctx)
    try:
        job_type = registry.get(job.job_type)
        result = job_type.handle(ctx, job_type.parse(job.payload))
        encoded = to_json(result, "the handler's result")
    except Suspend as suspend:
        return _suspend(ctx, suspend)
    except CancelRequested:
        return _cancel(ctx)
    except ShutdownRequested:
        return _give_back(ctx)
    except LostOwnership:
        _log("ownership_lost", job.id, attempt=job.attempt)
        return "lost"
    except Exception as exc:
        return _failed(ctx, exc)
    return _complete(ctx, encoded)


def _transition(ctx: JobContext, new: JobStatus, **kwargs) -> store.Finished | None:
    status_event = store.event(3, "status", new.value, status_data(new, S.RUNNING))
    events = [*ctx.pending_step_event(), status_event]
    try:
        done = store.finish(ctx.owner, new, ctx.pending, events, **kwargs)
    except psycopg.DataError as exc:
        # The database refused what the job produced: record the failure without it,
        # so the job still reaches a terminal state instead of staying `running`.
        log.exception("finish refused", extra={"action": "finish_refused",
                                               "job_id": str(ctx.job_id)})
        ctx.pending = None
        status_event = store.event(3, "status", S.FAILED.value, status_data(S.FAILED, S.RUNNING))
        refused = f"the database refused the job's output: {exc.diag.message_primary}"
        done = store.finish(ctx.owner, S.FAILED, None, [status_event], error=refused)
    if done is None:
        _log("ownership_lost", ctx.job_id, attempt=ctx.attempt)
    else:
        _log(f"job_{new.value}", ctx.job_id, attempt=ctx.attempt)
    return done


def _after_terminal(done: store.Finished) -> None:
    if done.parent_job_id is not None:
        control.resume_if_ready(done.parent_job_id)
    if done.concurrency_key is not None:
        control.wake_next_for_key(done.concurrency_key)


def _complete(ctx: JobContext, encoded: str) -> str:
    done = _transition(ctx, S.COMPLETED, result=encoded)
    if done is None:
        return "lost"
    _after_terminal(done)
    return "completed"


def _failed(ctx: JobContext, exc: Exception) -> str:
    job_type = _job_type_or_none(ctx.job_type)
    policy = job_type.retry_policy if job_type else RetryPolicy()
    decision = decide(ctx.attempt, ctx.max_attempts, exc, policy)
    error = describe_error(exc)
    if not isinstance(exc, SwitchyardError):
        log.exception("handler raised",
                      extra={"action": "handler_error", "job_id": str(ctx.job_id)})
    if isinstance(decision, Retry):
        done = _transition(ctx, S.QUEUED, error=error, delay=decision.delay,
                           refund_attempt=not decision.count_attempt)
        if done is None:
            return "lost"
        if done.cancel_requested:
            return _cancel_parked(done)
        dispatch_quietly(done.id, done.queue, done.priority, countdown=decision.delay)
        if done.concurrency_key is not None:
            control.wake_next_for_key(done.concurrency_key)
        return "retrying"
    assert isinstance(decision, Fail)
    done = _transition(ctx, S.FAILED, error=error)
    if done is None:
        return "lost"
    # Nobody is left to use the children's results: stop them too. (The failed job
    # itself is past cancel; a manual retry re-spawns nothing, its spawn steps replay.)
    control.cancel_tree(done.id)
    _after_terminal(done)
    return "failed"


def _suspend(ctx: JobContext, suspend: Suspend) -> str:
    done = _transition(ctx, S.WAITING, wake_at=suspend.wake_at, wait_for=suspend.wait_for,
                       wait_reason=suspend.reason)
    if done is None:
        return "lost"
    if done.cancel_requested:
        return _cancel_parked(done)
    # Children may have finished, or the timer come due, before the row said
    # `waiting`; nobody would wake the job then, so check once more ourselves.
    control.resume_if_ready(done.id)
    if done.concurrency_key is not None:
        control.wake_next_for_key(done.concurrency_key)
    return "waiting"


def _cancel(ctx: JobContext) -> str:
    done = _transition(ctx, S.CANCELED)
    if done is None:
        return "lost"
    control.cancel_tree(done.id)  # the children go with their parent
    _after_terminal(done)
    return "canceled"


def _cancel_parked(done: store.Finished) -> str:
    """A cancel arrived during the last step, with no boundary after it to notice it.

    The job is queued or waiting now, where a cancel takes effect at once.
    """
    control.cancel_tree(done.id)
    if done.concurrency_key is not None:
        control.wake_next_for_key(done.concurrency_key)
    return "canceled"


def _give_back(ctx: JobContext) -> str:
    done = _transition(ctx, S.QUEUED, delay=0.0, refund_attempt=True)
    if done is None:
        return "lost"
    dispatch_quietly(done.id, done.queue, done.priority)
    return "requeued"


def _job_type_or_none(name: str) -> registry.JobType | None:
    try:
        return registry.get(name)
    except SwitchyardError:
        return None


def _log(action: str, job_id: uuid.UUID | str, **extra: object) -> None:
    log.info("%s %s", action, job_id, extra={"action": action, "job_id": str(job_id), **extra})

