"""What the integration tests read back from PostgreSQL, and how they wait for it."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from psycopg.rows import dict_row

from tasks.engine import pg, sweeps
from tasks.engine.enqueue import Enqueued, EnqueueRequest, enqueue
from tasks.engine.events import step_of
from tests.conftest import wait_until
from tests.support.broker import PARKED

TERMINAL = ("completed", "failed", "canceled")


def tuples(sql: str, params: pg.Params = None) -> list[tuple[Any, ...]]:
    """Rows by position, for the tests' own ad-hoc reads only: the application reads rows
    by column name (tasks.engine.pg has no tuple fetch)."""
    cur = pg.connection().execute(sql, params)  # type: ignore[arg-type]
    result = cur.pgresult
    return cur.fetchall() if result is not None and result.status == pg.TUPLES_OK else []


def tuple_row(sql: str, params: pg.Params = None) -> tuple[Any, ...] | None:
    """The first row by position (tests only, as `tuples`)."""
    found = tuples(sql, params)
    return found[0] if found else None


def new_job(project: str, job_type: str = "system.canary", payload: dict | None = None,
            *, publish: bool = True, **options: Any) -> uuid.UUID:
    req = EnqueueRequest(project_id=project, job_type=job_type, payload=payload or {}, **options)
    done: Enqueued = enqueue(req, publish=publish)
    assert done.created
    return done.job_id


def job(job_id: uuid.UUID | str) -> dict[str, Any]:
    with pg.connection().cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM agent_jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None, f"job {job_id} does not exist"
    return row


def steps(job_id: uuid.UUID | str) -> list[dict[str, Any]]:
    with pg.connection().cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM job_steps WHERE job_id = %s ORDER BY seq",
                           (job_id,)).fetchall()


def status_history(job_id: uuid.UUID | str) -> list[str]:
    """Every status the job's feed recorded, in order."""
    rows = tuples("SELECT data->>'status' FROM agent_job_events "
                  "WHERE job_id = %s AND type = 'status' ORDER BY id", (job_id,))
    return [r[0] for r in rows]


def step_events(job_id: uuid.UUID | str, status: str | None = None) -> list[str]:
    """Names of the steps in the job's feed, optionally only those with `status` (the last
    outcome of a run rides on its `status` event)."""
    rows = tuples("SELECT type, data FROM agent_job_events WHERE job_id = %s "
                  "AND type IN ('step', 'status') ORDER BY id", (job_id,))
    outcomes = [s for s in (step_of(t, d) for t, d in rows) if s is not None]
    return [s["name"] for s in outcomes if status is None or s["status"] == status]


def started_steps(job_id: uuid.UUID | str) -> list[str]:
    """Each step's name once per time it started, in step order: its row's `attempts`
    (every start is counted there; a step announces its start by event only when slow)."""
    rows = tuples("SELECT name, attempts FROM job_steps WHERE job_id = %s ORDER BY seq",
                  (job_id,))
    return [name for name, attempts in rows for _ in range(attempts)]


def wait_for(job_id: uuid.UUID | str, *statuses: str, timeout: float = 15.0) -> dict[str, Any]:
    wanted = statuses or TERMINAL

    def reached() -> dict[str, Any] | None:
        row = job(job_id)
        return row if row["status"] in wanted else None

    return wait_until(reached, timeout=timeout, what=f"job {job_id} to be {'/'.join(wanted)}")


def sweep_until(predicate: Callable[[], object], timeout: float = 15.0,
                what: str = "condition") -> object:
    """Stand in for beat: run the sweeps (at most once per tick) until `predicate` holds."""

    def swept() -> object:
        sweeps.run_sweeps()
        return predicate()

    return wait_until(swept, timeout=timeout, interval=0.1, what=what)


def in_threads(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run fn(0..n-1) in n threads released together; each thread has its own connection."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = fn(i)
        except BaseException as exc:  # re-raised in the test's thread below
            errors.append(exc)
        finally:
            pg.reset()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results


def sample_while(predicate: Callable[[], bool], sample: Callable[[], Any],
                 timeout: float = 30.0, interval: float = 0.02) -> list[Any]:
    """Call `sample` every `interval` until `predicate` holds; return every sample."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while not predicate():
        seen.append(sample())
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s; last sample {seen[-1]!r}")
        time.sleep(interval)
    return seen





def park(job_id: uuid.UUID | str) -> None:
    """Route the job's future wake-ups to PARKED, so a test can see them and no worker runs it."""
    pg.execute("UPDATE agent_jobs SET queue = %s WHERE id = %s", (PARKED, job_id))


def parked_wakeups() -> list[str]:
    """Job ids of every `run_job` message waiting in PARKED, read through the broker's own
    protocol (Redis's priority lists or an AMQP queue alike) and handed back unconsumed."""
    from tasks.celery_app import app

    ids: list[str] = []
    with app.connection_for_read() as conn:
        queue = app.amqp.queues[PARKED](conn.default_channel)  # declared as a publish would
        queue.declare()
        held = []
        while (message := queue.get(no_ack=False)) is not None:
            held.append(message)
            args, _kwargs, _embed = message.decode()
            ids.append(args[0])
        for message in held:
            message.requeue()
    return ids
