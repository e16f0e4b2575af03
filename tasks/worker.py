"""The Celery tasks (thin: ids in, logic in plain modules) and the worker's signal hooks."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time

from celery import Celery, signals
from celery.apps.worker import Worker as CommandWorker

import tasks.catalog  # noqa: F401 - registers every job type
from tasks.celery_app import MAINTAIN, RUN_JOB, SCHEDULE, SWEEP, app
from tasks.coding import checkouts
from tasks.engine import (
    claim_ahead,
    control,
    lifecycle,
    pg,
    retention,
    runner,
    sweeps,
    telemetry,
)
from tasks.engine.store import Finished
from tasks.settings import get_settings
from tasks.startup import schedules

log = logging.getLogger(__name__)


@app.task(name=RUN_JOB, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_job(job_id: str) -> str:
    return runner.run_job(job_id)


@app.task(name=SWEEP, ignore_result=True)
def sweep() -> dict[str, int | None]:
    try:
        return sweeps.run_sweeps()
    except Exception as exc:
        if not pg.is_connection_error(exc):
            raise
        # The database restarting is no bug: one line, and the next tick sweeps again
        # (Celery logged each as an ERROR with its traceback, which pages an operator).
        log.warning("sweep skipped: the database is unreachable (%s)", pg.first_line(exc),
                    extra={"action": "sweep_skipped"})
        return {}


@app.task(name=SCHEDULE, ignore_result=True)
def schedule(job_type: str) -> dict[str, int]:
    return schedules.enqueue_scheduled([job_type])


@app.task(name=MAINTAIN, ignore_result=True)
def maintain() -> dict[str, object]:
    report = retention.maintain().as_dict()
    # Each worker machine has its own data dir: whichever runs the pass sweeps its own.
    report["checkouts_removed"] = checkouts.remove_orphans()
    return report


@signals.worker_init.connect
def _on_worker_init(sender: object = None, **_: object) -> None:
    lifecycle.pin_worker_id()  # before a prefork pool forks: its children share the id
    telemetry.setup("switchyard-worker")  # OTEL_* variables set: traces over OTLP
    # Celery sends worker_shutdown on a warm stop but not on every cold one (a second signal
    # that raises WorkerTerminate, as on AMQP), so a `celery worker` process also releases at
    # exit; a release finds nothing the second time. Children share the id: only this pid.
    if isinstance(sender, CommandWorker):
        atexit.register(_release_at_exit, os.getpid())
    pool = _pool_name(getattr(sender, "pool_cls", None))
    if pool == "solo":
        consume_without_acks(app)
    # Only a thread pool's wake-ups wait in this process for a thread (tasks.engine.claim_ahead)
    claim_ahead.enable(pool in ("threads", "thread"))
    try:  # the coming days' event partitions, in case beat has not run for a while
        retention.ensure_partitions()
    except Exception:
        log.warning("could not make the event log's partitions", exc_info=True)
    finally:
        pg.reset()  # a prefork child must not inherit this connection


@signals.worker_ready.connect
def _on_worker_ready(sender=None, **_: object) -> None:
    queues = [q.name for q in sender.app.amqp.queues.consume_from.values()] if sender else []
    lifecycle.start_heartbeat(queues)


@signals.worker_shutting_down.connect
def _on_shutting_down(**_: object) -> None:
    lifecycle.request_shutdown()
    threading.Thread(target=_hand_back_after_grace, name="hand-back", daemon=True).start()


HAND_BACK_MARGIN = 2.0  # s past the grace period: before `up` (grace + 10 s) kills the worker


def _hand_back_after_grace() -> None:
    """A step longer than the grace period never reaches the boundary where its job is
    handed back: whoever stopped the worker then killed it, the job went stale, and the
    stale sweep charged it an attempt (Ctrl-C at `up` during a long command or model call;
    a thread pool's cold shutdown waits for its threads). Past the grace period the worker
    gives back what it still runs, costing no attempt, and exits at once: nothing of the
    abandoned step goes on beside the next run, and its late writes are fenced anyway. Each
    job's wake-up goes out before the exit (a publish returns once the broker has it), so
    the next worker takes it at once rather than after the dispatch sweep's delay; one that
    cannot be sent is the sweep's, as ever. (On RabbitMQ a solo worker, which consumes
    without acks, may be pushed its own wake-up as it exits: the sweep re-sends that too.)"""
    time.sleep(get_settings().shutdown_grace_seconds + HAND_BACK_MARGIN)
    if not lifecycle.holds_runs():
        return
    rows = lifecycle.release_all()
    log.warning("grace period over: %d job(s) handed back mid-step, exiting", len(rows),
                extra={"action": "hand_back_mid_step"})
    try:
        for row in rows:
            control.after_transition(Finished.of(row))
    except Exception:  # the exit must happen: what was not sent is the sweep's
        log.warning("wake-ups of jobs handed back not sent; the dispatch sweep will",
                    extra={"action": "hand_back_wakeups_failed"}, exc_info=True)
    logging.shutdown()
    os._exit(0)


@signals.worker_shutdown.connect
def _on_shutdown(**_: object) -> None:
    for row in lifecycle.release_all():
        control.after_transition(Finished.of(row))


def _release_at_exit(pid: int) -> None:
    if os.getpid() == pid:
        _on_shutdown()


def _pool_name(pool: object) -> str:
    """`pool` as worker_init sees it: an alias ("solo", "threads") or, from the command line,
    the class (celery.concurrency.solo.TaskPool: every pool's class is named TaskPool), as
    the alias or the last part of its module's name."""
    name = pool if isinstance(pool, str) else getattr(pool, "__module__", "")
    return str(name).lower().split(".")[-1]


def consume_without_acks(celery_app: Celery) -> None:
    """A solo worker takes its wake-ups without broker acknowledgements.

    It runs one job at a time in the thread that fetched it, so at most one wake-up is
    ever off the queue and not yet a claim; acks only cost two Redis round trips a job
    (the unacked hash on delivery, its removal on ack: a quarter of a solo worker's busy
    time, issue 26). A wake-up lost with a killed worker is the dispatch sweep's: a job
    still queued whose wake-up went out SWITCHYARD_REDISPATCH_AFTER_SECONDS ago is sent
    again; a claimed one goes stale and is reclaimed. (Prefork and threads workers hold
    prefetched wake-ups they have not started, so they keep acks_late.)
    """
    amqp = celery_app.amqp
    amqp.TaskConsumer = functools.partial(amqp.TaskConsumer, no_ack=True)  # type: ignore[method-assign]
