"""Run one delivery of `tasks.run_job(job_id)`: claim, run the handler, record the outcome."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import psycopg

from tasks.engine import (
    claim_ahead,
    control,
    lifecycle,
    pg,
    registry,
    store,
    system_parts,
    telemetry,
)
from tasks.engine.context import JobContext, describe_error, to_json
from tasks.engine.dispatch import dispatch_quietly
from tasks.engine.errors import (
    CancelRequested,
    LostOwnership,
    RetryableError,
    ShutdownRequested,
    Suspend,
    SwitchyardError,
)
from tasks.engine.pg import DatabaseUnavailable, is_connection_error
from tasks.engine.retry import Fail, Retry, RetryLimits, RetryPolicy, decide
from tasks.engine.status import JobStatus
from tasks.settings import get_settings

log = logging.getLogger(__name__)
S = JobStatus
EARLY_SLACK = 0.05  # an early delivery is re-sent this much after the job is due


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
    try:
        claimed = claim_ahead.claim(job_id, worker)
    except DatabaseUnavailable:
        log.warning("claim gave up: database unreachable; the dispatch sweep re-sends",
                    extra={"action": "claim_abandoned", "job_id": str(job_id)})
        return "abandoned"
    if isinstance(claimed, store.NotClaimed):
        return _not_claimed(job_id, claimed)
    # Heartbeats cover this run, by its token, from its claim until its last write.
    lifecycle.holding(claimed.token, claimed.id)
    try:
        return _run(claimed, worker)
    except DatabaseUnavailable:
        # The run's outcome could not be written: leave the row to go stale, so the
        # sweep reclaims it (its completed steps replay; the one in flight runs again).
        log.warning("run abandoned: database unreachable", exc_info=True,
                    extra={"action": "run_abandoned", "job_id": str(job_id)})
        return "abandoned"
    finally:
        lifecycle.released(claimed.token)
        claim_ahead.ended()


def _not_claimed(job_id: str, why: store.NotClaimed) -> str:
    if not why.early:
        return "skipped"  # a duplicate or stale delivery: the run in progress is untouched
    # Early by the database's clock (a retry's countdown ran on a worker's clock): send
    # the wake-up again for when it is due, rather than wait for the dispatch sweep.
    dispatch_quietly(job_id, why.queue, why.priority, countdown=why.due_in + EARLY_SLACK)
    return "early"


ENDED = frozenset({S.COMPLETED.value, S.FAILED.value, S.CANCELED.value, "canceled"})


def _run(job: store.ClaimedJob, worker: str) -> str:
    outcome = _run_handler(job, worker)
    # A lost run may have ended by another hand (the timeout sweep, a cancel), or may be
    # another worker's now: only a job that has ended gives its resources back.
    if outcome in ENDED or (outcome == "lost" and store.has_ended(job.id)):
        _on_end(job)
    return outcome


def _on_end(job: store.ClaimedJob) -> None:
    job_type = _job_type_or_none(job.job_type)
    if job_type is None or job_type.on_end is None:
        return
    try:
        job_type.on_end(str(job.id))
    except Exception:  # the job's outcome is written; a leftover is the orphan sweep's
        log.exception("on_end failed", extra={"action": "on_end_failed", "job_id": str(job.id)})


def _run_handler(job: store.ClaimedJob, worker: str) -> str:
    if not telemetry.enabled():
        return _run_claimed(job, worker)
    parent = pg.fetch_value("SELECT traceparent FROM agent_jobs WHERE id = %s", (job.id,))
    with telemetry.span(f"job {job.job_type}", {
            "switchyard.job.id": str(job.id), "switchyard.job.type": job.job_type,
            "switchyard.job.attempt": job.attempt, "switchyard.worker": worker},
            parent=parent) as current:
        outcome = _run_claimed(job, worker)
        telemetry.annotate(current, {"switchyard.job.outcome": outcome})
        return outcome


def _run_claimed(job: store.ClaimedJob, worker: str) -> str:
    _log("job_claimed", job.id, attempt=job.attempt, job_type=job.job_type)
    ctx = JobContext(job, worker)
    if job.cancel_requested:
        # The first step after a claim does not check in before it runs (see
        # JobContext.step), so a cancel asked of an earlier attempt is honoured here.
        return _finish(ctx, S.CANCELED)
    try:
        job_type = registry.get(job.job_type)
        system_parts.require(job_type.name, job_type.requires)
        result = job_type.handle(ctx, job_type.parse(job.payload))
        encoded = to_json(result, "the handler's result")
    except Suspend as suspend:
        # Waiting is not a failure: the claim's attempt is given back.
        return _finish(ctx, S.WAITING, refund_attempt=True, wake_at=suspend.wake_at,
                       wait_for=suspend.wait_for, wait_reason=suspend.reason,
                       wait_any=suspend.wait_any, wait_approvals=suspend.wait_approvals)
    except CancelRequested:
        return _finish(ctx, S.CANCELED)
    except ShutdownRequested:
        return _finish(ctx, S.QUEUED, delay=0.0, refund_attempt=True)
    except LostOwnership:
        _log("ownership_lost", job.id, attempt=job.attempt)
        return "lost"
    except DatabaseUnavailable:
        raise
    except Exception as exc:
        return _failed(ctx, job, exc)
    return _finish(ctx, S.COMPLETED, result=encoded)


def _finish(ctx: JobContext, new: JobStatus, **kwargs: Any) -> str:
    """Write the run's last move, then whatever follows it (control.after_transition)."""
    try:
        done = store.finish(ctx.owner, ctx.next_write(), new, ctx.pending, **kwargs)
    except psycopg.DataError as exc:
        # The database refused what the job produced: record the failure without it,
        # so the job still reaches a terminal state instead of staying `running`.
        log.exception("finish refused", extra={"action": "finish_refused",
                                               "job_id": str(ctx.job_id)})
        ctx.pending = None
        refused = f"the database refused the job's output: {exc.diag.message_primary}"
        done = store.finish(ctx.owner, ctx.next_write(), S.FAILED, None, error=refused)
    if done is None:
        _log("ownership_lost", ctx.job_id, attempt=ctx.attempt)
        return "lost"
    _log(f"job_{done.status.value}", ctx.job_id, attempt=ctx.attempt)
    control.after_transition(done)
    if done.cancel_requested and done.status in (S.QUEUED, S.WAITING):
        return "canceled"
    return _OUTCOME.get(done.status, done.status.value)


_OUTCOME = {S.QUEUED: "retrying", S.WAITING: "waiting"}


def _failed(ctx: JobContext, job: store.ClaimedJob, exc: Exception) -> str:
    job_type = _job_type_or_none(ctx.job_type)
    policy = job_type.retry_policy if job_type else RetryPolicy()
    if is_connection_error(exc):
        # The handler's own statement lost the database: the engine's problem, not the
        # handler's, so the retry costs no attempt (and the free-retry bounds apply).
        # Its message names the database's host and port: the operator's log gets it,
        # the tenant's last_error does not.
        log.warning("a job's statement lost the database: %s", exc,
                    extra={"action": "job_db_lost", "job_id": str(job.id)})
        exc = RetryableError("database connection lost; retrying", count_attempt=False)
    settings = get_settings()
    limits = RetryLimits(free_retries=job.free_retries, free_seconds=job.free_retry_seconds,
                         max_free_retries=settings.free_retry_max,
                         max_free_seconds=settings.free_retry_max_seconds,
                         max_delay=settings.retry_after_max_seconds)
    decision = decide(ctx.attempt, ctx.max_attempts, exc, policy, limits=limits)
    error = describe_error(exc)
    if not isinstance(exc, SwitchyardError):
        log.exception("handler raised",
                      extra={"action": "handler_error", "job_id": str(ctx.job_id)})
    if isinstance(decision, Retry):
        free = not decision.count_attempt
        return _finish(ctx, S.QUEUED, error=error, delay=decision.delay, refund_attempt=free,
                       free_retry=free)
    assert isinstance(decision, Fail)
    if decision.reason:
        error = f"{error} ({decision.reason})"
    return _finish(ctx, S.FAILED, error=error)


def _job_type_or_none(name: str) -> registry.JobType | None:
    try:
        return registry.get(name)
    except SwitchyardError:
        return None


def _log(action: str, job_id: uuid.UUID | str, **extra: object) -> None:
    log.info("%s %s", action, job_id, extra={"action": action, "job_id": str(job_id), **extra})
