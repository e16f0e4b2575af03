"""The Celery tasks (thin: ids in, logic in plain modules) and the worker's signal hooks."""

from __future__ import annotations

import atexit
import functools
import logging
import os

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
from tasks.startup import schedules

log = logging.getLogger(__name__)


@app.task(name=RUN_JOB, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_job(job_id: str) -> str:
    return runner.run_job(job_id)


@app.task(name=SWEEP, ignore_result=True)
def sweep() -> dict[str, int | None]:
    return sweeps.run_sweeps()


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
