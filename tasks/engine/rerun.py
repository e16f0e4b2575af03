"""Rerun a finished job from one of its steps: a new job of the same type, project (and so
owner), whose steps before that one are copied from the original's record and replayed,
not run; from that step on it runs, with the original payload or an edited one.

What a rerun may not do, and why:
- the original must be finished (completed, failed or canceled): a running job's record
  is still being written;
- `from_step` names a step the original recorded (its first step of that name), and every
  step before it completed: a replay needs their outputs;
- only a job type a client may enqueue can be rerun (an internal one, such as the execution
  of an approved effect, is the engine's own);
- effects are never performed twice by a rerun. Every effect goes through the ledger
  (tasks.services.effects.ledger) under a key of its approval: a step before `from_step` is
  replayed from its record, so its effect is not called at all, and a step from `from_step`
  on that asks for the same approved effect again gets the ledger's recorded outcome
  (`replayed`), never a second send. A new effect needs a new approval, as always.
- children spawned by the copied steps are the original's: their ids are in the copied
  outputs, and the rerun reads their results rather than spawning them again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from tasks.engine import pg, registry
from tasks.engine.enqueue import SELECT_BY_KEY, Enqueued, EnqueueRequest, enqueue
from tasks.engine.errors import SwitchyardError

FINISHED = ("completed", "failed", "canceled")


class RerunRefused(SwitchyardError):
    """The rerun cannot be made as asked: `not_finished` and `step_not_completed` are the
    original's state (409), `unknown_step` and `not_rerunnable` the request's (422)."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.http_status = 422 if code in ("unknown_step", "not_rerunnable") else 409
        self._details = details or {}

    def details(self) -> dict[str, Any]:
        return self._details


@dataclass(frozen=True)
class Rerun:
    job_id: uuid.UUID
    copied_steps: int
    created: bool = True


_ORIGINAL = """
SELECT id, project_id, job_type, status, payload, priority, max_attempts, timeout_seconds
FROM agent_jobs WHERE id = %s
"""
_STEPS = "SELECT seq, name, status FROM job_steps WHERE job_id = %s ORDER BY seq"
# What a client does instead of rerunning one of Switchyard's own job types.
_INSTEAD = {"workflow.run": ": start the workflow again (POST /api/workflows/<wid>/runs)"}

# The copies keep the original's times: they say when the work was done.
_COPY = """
INSERT INTO job_steps (job_id, seq, name, status, output, error, attempts, started_at,
                       finished_at)
SELECT %(new)s, seq, name, status, output, error, 0, started_at, finished_at
FROM job_steps WHERE job_id = %(old)s AND seq < %(seq)s
"""

# The steps a rerun copied from its original (_COPY gives them 0 attempts; a step the rerun
# runs itself has 1 or more): what a retried request answers, as the first one did.
_COPIED = "SELECT count(*) FROM job_steps WHERE job_id = %s AND attempts = 0"


def _made_before(job_id: uuid.UUID) -> Rerun:
    return Rerun(job_id, int(pg.fetch_value(_COPIED, (str(job_id),))), created=False)


def rerun(job_id: uuid.UUID | str, from_step: str, payload: dict[str, Any] | None = None,
          *, public: bool = True, idempotency_key: str | None = None) -> Rerun:
    """Create the rerun (its copied steps in the same transaction as its row, so no worker
    can claim it before they exist) and publish it. With `idempotency_key`, asking again
    answers the rerun made the first time (`created` False). Raises RerunRefused."""
    original = pg.fetch_one_dict(_ORIGINAL, (str(job_id),))
    if original is None:  # the caller found it a moment ago: deleted since
        raise RerunRefused("not_finished", "the job is gone")
    key = f"rerun:{original['id']}:{idempotency_key}" if idempotency_key else None
    # A retried request answers its first rerun before any rule is asked again: the
    # original may have moved since (retried, so no longer finished).
    made = pg.fetch_one_dict(SELECT_BY_KEY, (original["project_id"], key)) if key else None
    if made is not None:
        return _made_before(made["id"])
    if original["status"] not in FINISHED:
        raise RerunRefused("not_finished", f"only a finished job can be rerun; this one is "
                           f"{original['status']}", {"status": original["status"]})
    if public and not registry.get(original["job_type"]).public:
        # Said before the steps are: their names are the engine's (run:resolve:s2), and a
        # client given them would only meet this refusal next, worded as an unknown type.
        raise RerunRefused("not_rerunnable", f"a {original['job_type']} job is Switchyard's "
                           "own and cannot be rerun" + _INSTEAD.get(original["job_type"], ""),
                           {"job_type": original["job_type"]})
    steps = pg.fetch_dicts(_STEPS, (original["id"],))
    start = next((s for s in steps if s["name"] == from_step), None)
    if start is None:
        names = list(dict.fromkeys(s["name"] for s in steps))
        raise RerunRefused("unknown_step", f"the job recorded no step named {from_step!r}",
                           {"from_step": from_step, "steps": names[:100]})
    unfinished = [s for s in steps if s["seq"] < start["seq"] and s["status"] != "completed"]
    if unfinished:
        first = unfinished[0]
        raise RerunRefused("step_not_completed",
                           f"step {first['seq']} {first['name']!r} before {from_step!r} did "
                           f"not complete ({first['status']}): rerun from it instead",
                           {"step": first["name"]})
    request = EnqueueRequest(
        project_id=original["project_id"], job_type=original["job_type"],
        payload=original["payload"] if payload is None else payload,
        priority=original["priority"], max_attempts=original["max_attempts"],
        timeout_seconds=original["timeout_seconds"],
        idempotency_key=key)
    with pg.transaction():
        job: Enqueued = enqueue(request, publish=False, public=public)
        if not job.created:  # the same key again: the rerun made then
            return _made_before(job.job_id)
        pg.execute("UPDATE agent_jobs SET rerun_of = %s WHERE id = %s",
                   (original["id"], job.job_id))
        copied = pg.execute(_COPY, {"new": job.job_id, "old": original["id"],
                                    "seq": start["seq"]})
    job.publish()
    return Rerun(job.job_id, copied)
