"""The handler's view of its job: checkpointed steps, events, children, waits and timers.

Replay is the heart of it: a step recorded as completed returns its stored
output instead of running again, so a job can be retried, reclaimed after a
crash or resumed after a wait and pick up exactly where it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from tasks.engine import lifecycle, pg, start_watch, store, telemetry, trace
from tasks.engine.errors import (
    CancelRequested,
    JobTimeout,
    LostOwnership,
    NonDeterministicStep,
    PermanentError,
    ShutdownRequested,
    Suspend,
)
from tasks.engine.events import STEP_COMPLETED, STEP_FAILED, step_data, step_message
from tasks.engine.sql import one_ended
from tasks.engine.status import TERMINAL, JobStatus
from tasks.engine.storable import to_json
from tasks.settings import get_settings

T = TypeVar("T")

# For wait_any(): the resume predicate's own test, asked before suspending.
WAIT_ANY_DONE = f"SELECT {one_ended('%(ids)s::uuid[]', '%(approvals)s::uuid[]')}"


@dataclass(frozen=True)
class ChildOutcome:
    id: str
    job_type: str
    status: str
    result: Any
    error: str | None


# The children a job may wait for: its own, or, for a rerun (tasks.engine.rerun), those of
# the job it reruns, and of the one that reran, and so on: the copied spawn steps hold their
# ids, and the rerun reads their results rather than spawning them again.
CHILDREN = """
WITH RECURSIVE lineage(id) AS (
    SELECT %(parent)s::uuid
    UNION
    SELECT j.rerun_of FROM agent_jobs j JOIN lineage l ON j.id = l.id
    WHERE j.rerun_of IS NOT NULL
)
SELECT id, job_type, status, result, last_error FROM agent_jobs
WHERE id = ANY(%(ids)s::uuid[]) AND parent_job_id IN (SELECT id FROM lineage)
"""


class JobContext:
    """The API every handler is written against: `def handle(ctx: JobContext, p: Payload)`."""

    def __init__(self, job: store.ClaimedJob, worker: str):
        self.job_id = job.id
        self.project_id = job.project_id
        self.job_type = job.job_type
        self.attempt = job.attempt
        self.max_attempts = job.max_attempts
        self.worker = worker
        self.owner = store.Owner(job.id, job.token)
        self.clock = job.clock
        self._writes = 0  # this run's writes so far: each has its number (store.checkpoint)
        self._recorded = job.steps
        self._seq = 0
        self._counters: dict[str, int] = {}
        self.pending: store.PendingStep | None = None
        self._wrote = False  # anything written since the claim? (see tasks.engine.start_watch)
        self._deadline = time.monotonic() + job.timeout_seconds if job.timeout_seconds else None

    @property
    def replaying(self) -> bool:
        """True while the handler is re-walking steps a previous run already completed."""
        return self._seq < len(self._recorded) and self._recorded[self._seq].status == "completed"

    def peek(self) -> store.RecordedStep | None:
        """The step recorded at the position the next step() takes, if a run recorded one:
        lets a handler that replays its own record name a divergence in its own words."""
        return self._recorded[self._seq] if self._seq < len(self._recorded) else None

    @property
    def current_step(self) -> int | None:
        """The number of the step being run (inside a step's function), else of the last one."""
        return self._seq or None

    def step(self, name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        index = self._seq
        self._seq += 1
        seq = index + 1  # steps are numbered from 1, as people count them
        if index < len(self._recorded):
            recorded = self._recorded[index]
            if recorded.name != name:
                raise NonDeterministicStep(
                    f"step {seq} is {name!r} in this run but {recorded.name!r} was recorded: "
                    "handlers must call their steps in the same order every time"
                )
            if recorded.status == "completed":
                return recorded.output
        self._check_boundary()
        if self._wrote or self.pending is not None:
            # The previous step's outcome and this step's row, one statement; the outcome's
            # event names this step (`next`), which owes no `started` event of its own
            # unless it is still running after start_watch.WRITE_AFTER.
            self._write(seq=seq, name=name, events=[], next_step=(seq, name))
            deferred = start_watch.defer(self.owner, seq, name, self.clock.now(),
                                         row_written=True)
        else:
            deferred = start_watch.defer(self.owner, seq, name, self.clock.now())
        trace.step("start", self.job_id, seq, name, self.owner.token)
        try:
            with telemetry.span(f"step {name}", {"switchyard.step.seq": seq,
                                                 "switchyard.step.name": name}):
                output = fn(*args, **kwargs)
            encoded = bounded_output(to_json(output, f"the output of step {name!r}"), name)
        except Exception as exc:
            trace.step("end", self.job_id, seq, name, self.owner.token, ok=False)
            self.pending = self._outcome(deferred, seq, name, STEP_FAILED,
                                         error=describe_error(exc))
            raise
        except CancelRequested:
            # Stopped inside the step (a long command polls lifecycle.interrupted): the
            # step's record ends with the job's cancel.
            trace.step("end", self.job_id, seq, name, self.owner.token, ok=False)
            self.pending = self._outcome(deferred, seq, name, STEP_FAILED,
                                         error="canceled while running")
            raise
        except BaseException:
            trace.step("end", self.job_id, seq, name, self.owner.token, ok=False)
            if deferred is not None:
                start_watch.settle(deferred)
            raise
        trace.step("end", self.job_id, seq, name, self.owner.token, ok=True)
        self.pending = self._outcome(deferred, seq, name, STEP_COMPLETED, output=encoded)
        return json.loads(encoded)

    def _outcome(self, deferred: start_watch.DeferredStart | None, seq: int, name: str,
                 status: str, **fields: str) -> store.PendingStep:
        unwritten = None
        if deferred is not None and not start_watch.settle(deferred) \
                and not deferred.row_written:
            unwritten = deferred.started_at
        return store.PendingStep(seq, name, status, unwritten_start=unwritten, **fields)

    def log(self, message: str, **data: Any) -> None:
        self.emit("log", message, data)

    def emit(self, type_: str, message: str, data: dict[str, Any] | None = None) -> None:
        """Append an event to the job's feed. Skipped while replaying, so replays add no noise."""
        if self.replaying:
            return
        self._write(events=[store.event(store.Order.NEXT, type_, message,
                                        bounded_event_data(to_json(data or {}, "event data")))])

    def spawn(self, job_type: str, payload: dict[str, Any], **options: Any) -> str:
        """Enqueue a child once per parent and position; returns its id."""
        from tasks.engine.enqueue import EnqueueRequest, enqueue

        n = self._next("spawn")

        def create() -> str:
            req = EnqueueRequest(project_id=self.project_id, job_type=job_type, payload=payload,
                                 idempotency_key=f"child:{self.job_id}:{n}",
                                 parent_job_id=self.job_id, **options)
            return str(enqueue(req).job_id)

        return self.step(f"spawn:{job_type}:{n}", create)

    def spawn_many(self, children: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """Enqueue several children as one step: one statement, one publishing connection
        (tasks.engine.enqueue.enqueue_many). Each child keeps the key a spawn() at its
        position would have (child:<parent>:<n>), so however a run recorded its spawns, one
        or many at a time, each child is made once. A child refused (an unknown job type…)
        fails the step, as spawn() would; the others stand and a retry finds them."""
        from tasks.engine.enqueue import EnqueueRequest, enqueue_many

        numbers = [self._next("spawn") for _ in children]
        if not children:
            return []

        def create() -> list[str]:
            made = enqueue_many([
                EnqueueRequest(project_id=self.project_id, job_type=job_type, payload=payload,
                               idempotency_key=f"child:{self.job_id}:{n}",
                               parent_job_id=self.job_id)
                for (job_type, payload), n in zip(children, numbers, strict=True)])
            for outcome in made:
                if isinstance(outcome, Exception):
                    raise outcome
            return [str(o.job_id) for o in made]  # type: ignore[union-attr]

        return self.step(f"spawn_many:{numbers[0]}:{len(children)}", create)

    def wait(self, child_ids: list[str]) -> list[ChildOutcome]:
        """Return the children's outcomes once all are terminal; until then suspend the job."""
        params = {"ids": [str(c) for c in child_ids], "parent": self.job_id}
        rows = pg.persisting(lambda: pg.fetch_dicts(CHILDREN, params), what="reading children")
        by_id = {str(r["id"]): r for r in rows}
        missing = [c for c in child_ids if str(c) not in by_id]
        if missing:
            raise PermanentError(f"wait(): {missing} are not children of this job")
        if any(JobStatus(by_id[str(c)]["status"]) not in TERMINAL for c in child_ids):
            raise Suspend("children", wait_for=[str(c) for c in child_ids])
        return [ChildOutcome(str(r["id"]), r["job_type"], r["status"], r["result"],
                             r["last_error"]) for r in (by_id[str(c)] for c in child_ids)]

    def wait_any(self, child_ids: list[str], approval_ids: list[str] | None = None) -> None:
        """Return at once if one child has ended or one approval is no longer pending; else
        suspend the job until one has. The caller looks again at what changed: unlike wait(),
        this is a wake-up, not a result, so a DAG driver re-reads its children after it."""
        if not child_ids and not approval_ids:
            raise PermanentError("wait_any(): nothing to wait for")
        ids = [str(c) for c in child_ids]
        approvals = [str(a) for a in approval_ids or []]
        params = {"ids": ids, "approvals": approvals}
        if pg.persisting(lambda: pg.fetch_value(WAIT_ANY_DONE, params), what="reading children"):
            return
        raise Suspend("children", wait_for=ids, wait_any=True, wait_approvals=approvals)

    def sleep(self, seconds: float) -> None:
        """A durable timer: the job leaves the worker and comes back when it is due.

        Due times are the database's (self.clock): the resume that compares them runs
        in PostgreSQL, so a worker whose clock is off neither wakes early nor loops.
        """
        n = self._next("sleep")
        due = self.step(f"sleep:{n}",
                        lambda: (self.clock.now() + timedelta(seconds=seconds)).isoformat())
        wake_at = datetime.fromisoformat(due)
        if wake_at > self.clock.now():
            raise Suspend("timer", wake_at=wake_at)

    def _next(self, counter: str) -> int:
        n = self._counters.get(counter, 0)
        self._counters[counter] = n + 1
        return n

    def _check_boundary(self) -> None:
        if lifecycle.grace_expired():
            raise ShutdownRequested("worker shutting down")
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise JobTimeout("the job ran past its timeout_seconds")

    def next_write(self) -> int:
        """The number of this run's next write (a retried write keeps its number)."""
        self._writes += 1
        return self._writes

    def _write(self, *, seq: int | None = None, name: str | None = None,
               events: list[dict], next_step: tuple[int, str] | None = None) -> None:
        cancel = store.checkpoint(self.owner, self.next_write(), self.pending, seq=seq,
                                  name=name, events=self.pending_step_event(next_step) + events)
        self.pending = None
        self._wrote = True
        if cancel is None:
            raise LostOwnership(f"job {self.job_id} attempt {self.attempt} is no longer ours")
        if cancel:
            raise CancelRequested("cancel requested")

    def pending_step_event(self, next_step: tuple[int, str] | None = None) -> list[dict]:
        """The event of the step outcome waiting to be written: one per step, whether or not
        its start was written (a deferred start's time is on its row). `next_step`: the step
        the same statement starts, named in the event (tasks.engine.events.step_data)."""
        p = self.pending
        if p is None:
            return []
        return [store.event(store.Order.OUTCOME, "step", step_message(p.name, p.status),
                            step_data(p.name, p.seq, p.status, next_step))]


def describe_error(exc: BaseException) -> str:
    text = str(exc).replace("\x00", "\\x00")  # a text column cannot hold NUL
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


PREVIEW_CHARS = 2048


def bounded_event_data(encoded: str) -> str:
    """Event data as stored: whole up to SWITCHYARD_EVENT_DATA_MAX_BYTES, else a preview
    that says what was cut (a feed is read by every stream of the project: no event may
    make a web process hold megabytes)."""
    size, limit = len(encoded.encode()), get_settings().event_data_max_bytes
    if size <= limit:
        return encoded
    return json.dumps({"truncated": True, "bytes": size, "limit": limit,
                       "preview": encoded[:PREVIEW_CHARS]})


def bounded_output(encoded: str, name: str) -> str:
    """A step's output as stored, at most SWITCHYARD_STEP_OUTPUT_MAX_BYTES; a larger one
    fails the step saying so (it is replayed whole on every retry and served by the API)."""
    size, limit = len(encoded.encode()), get_settings().step_output_max_bytes
    if size > limit:
        raise PermanentError(
            f"the output of step {name!r} is {size} bytes, over the limit of {limit} "
            "(SWITCHYARD_STEP_OUTPUT_MAX_BYTES): keep large data in an artifact and return "
            "its id")
    return encoded
