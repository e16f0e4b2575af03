""""Why is this job stuck?": one human sentence from the facts the database holds.

`diagnose` is pure (facts in, sentence out); `gather` reads the facts, as far as the
viewer may see them: a tenant's facts count and name only its own jobs (other tenants'
work shows as a yes/no, never a count, an id or a type); an admin's cover the fleet.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from tasks.engine import fair, pg
from tasks.engine.sql import due, running_under_key, visible_to
from tasks.engine.status import TERMINAL, JobStatus
from tasks.settings import get_settings


@dataclass(frozen=True)
class Peer:
    id: str
    job_type: str
    status: str


@dataclass(frozen=True)
class Facts:
    now: datetime
    id: str
    job_type: str
    status: str
    queue: str
    attempts: int
    max_attempts: int
    run_after: datetime
    last_error: str | None = None
    locked_by: str | None = None
    heartbeat_at: datetime | None = None
    worker_seen_at: datetime | None = None
    wake_at: datetime | None = None
    wait_reason: str | None = None
    completed_at: datetime | None = None
    dispatched_at: datetime | None = None
    cancel_requested: bool = False
    concurrency_key: str | None = None
    concurrency_limit: int = 1
    current_step: str | None = None
    step_started_at: datetime | None = None
    waiting_on: list[Peer] = field(default_factory=list)
    key_holders: list[Peer] = field(default_factory=list)  # those the viewer may see
    key_at_limit: bool = False
    queue_consumers: int = 0  # live workers on the queue (how many, not which)
    queued_ahead: int = 0  # the viewer's own jobs ahead, or every job for the fleet view
    queued_tied: int = 0  # as many sent at the same moment: ahead of it or not, the broker's
    owner_cap: int = 0  # SWITCHYARD_OWNER_MAX_ACTIVE when the job is held back (else 0)
    owner_places: int = 0  # the places its owner holds: running, or queued and published
    owner_ahead: int = 0  # its owner's held-back due jobs that go out before it
    owner_tied: int = 0  # those due at the same moment (a batch's): in no set order with it
    others_ahead: bool = False  # a tenant's view: other tenants' jobs are ahead too
    scoped: bool = False  # counts and names cover the viewer's own jobs only
    stale_after_seconds: float = 60.0
    sweep_seconds: float = 5.0
    sweeps_seen_at: datetime | None = None  # the dispatch sweep's last run: beat is alive


@dataclass(frozen=True)
class Diagnosis:
    reason: str
    summary: str


def ago(now: datetime, then: datetime) -> str:
    return _span((now - then).total_seconds()) + " ago"


def until(now: datetime, then: datetime) -> str:
    return "in " + _span((then - now).total_seconds())


def _span(seconds: float) -> str:
    s = max(seconds, 0)
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def _peers(peers: list[Peer]) -> str:
    shown = ", ".join(f"{p.job_type} {p.id[:8]} ({p.status})" for p in peers[:5])
    return shown + (f" and {len(peers) - 5} more" if len(peers) > 5 else "")


def _sweeps_note(f: Facts) -> str:
    """When the job waits for a sweep and none has run lately, beat is down: say so (the
    sentence promised "the next sweep" for as long as beat stayed dead)."""
    if f.sweeps_seen_at is None:
        return " But no sweep has run yet: is beat running? Start it with `switchyard beat`."
    quiet = (f.now - f.sweeps_seen_at).total_seconds()
    if quiet <= max(30.0, 6 * f.sweep_seconds):
        return ""
    return (f" But no sweep has run for {_span(quiet)}: is beat running? Start it with "
            "`switchyard beat`.")


def diagnose(f: Facts) -> Diagnosis:
    status = JobStatus(f.status)
    if status == JobStatus.COMPLETED:
        return Diagnosis("completed", f"It is not stuck: it completed "
                         f"{ago(f.now, f.completed_at or f.now)} after {f.attempts} attempt(s).")
    if status == JobStatus.FAILED:
        return Diagnosis("failed", f"It failed after {f.attempts} attempt(s): {f.last_error}. "
                         "Once the cause is fixed, retry it (Retry on its page, or "
                         "POST /api/jobs/<id>/retry).")
    if status == JobStatus.CANCELED:
        return Diagnosis("canceled", f"It was canceled {ago(f.now, f.completed_at or f.now)}.")
    if status == JobStatus.WAITING:
        return _waiting(f)
    if status == JobStatus.RUNNING:
        return _running(f)
    return _queued(f)


def _waiting(f: Facts) -> Diagnosis:
    if f.waiting_on:
        return Diagnosis("waiting_on_children", f"It is waiting for {len(f.waiting_on)} child "
                         f"job(s) to finish: {_peers(f.waiting_on)}.")
    if f.wait_reason == "llm_budget" and f.wake_at is not None and f.wake_at > f.now:
        return Diagnosis("llm_budget", "Its project has used today's LLM budget (tokens or "
                         f"dollars); it resumes when the budget resets at "
                         f"{f.wake_at:%Y-%m-%d %H:%M} UTC ({until(f.now, f.wake_at)}).")
    if f.wake_at is not None and f.wake_at > f.now:
        return Diagnosis("sleeping", f"It is sleeping until {f.wake_at:%Y-%m-%d %H:%M:%S} UTC "
                         f"({until(f.now, f.wake_at)}).")
    return Diagnosis("ready_to_resume", "Everything it waited for is done; the next sweep "
                     f"(every {f.sweep_seconds:g}s) puts it back in the queue."
                     + _sweeps_note(f))


def _running(f: Facts) -> Diagnosis:
    where = f"on worker {f.locked_by}"
    step = (f" in step {f.current_step!r} (started {ago(f.now, f.step_started_at)})"
            if f.current_step and f.step_started_at else "")
    if f.cancel_requested:
        return Diagnosis("cancel_requested", f"A cancel was requested; it stops at its next step "
                         f"boundary. It is running {where}{step}.")
    beat = max((t for t in (f.worker_seen_at, f.heartbeat_at) if t is not None), default=None)
    if beat is None or (f.now - beat).total_seconds() > f.stale_after_seconds:
        seen = ("never sent a heartbeat" if beat is None
                else f"last sent a heartbeat {ago(f.now, beat)}")
        return Diagnosis("worker_lost", f"It is marked running {where}, which {seen} "
                         f"(stale after {f.stale_after_seconds:g}s); the sweep will reclaim it "
                         "and run it again from its last completed step." + _sweeps_note(f))
    return Diagnosis("running", f"It is running {where} (last heartbeat {ago(f.now, beat)})"
                     f"{step}, attempt {f.attempts} of {f.max_attempts}.")


def _queued(f: Facts) -> Diagnosis:
    if f.run_after > f.now:
        if f.last_error:
            return Diagnosis("retrying", f"It is retrying after an error ({f.last_error}); "
                             f"attempt {f.attempts + 1} of {f.max_attempts} starts "
                             f"{until(f.now, f.run_after)}.")
        return Diagnosis("scheduled", f"It is scheduled to run at "
                         f"{f.run_after:%Y-%m-%d %H:%M:%S} UTC ({until(f.now, f.run_after)}).")
    if f.owner_cap and f.owner_places >= f.owner_cap:
        whose, has = ("your", "you have") if f.scoped else ("its owner's", "its owner has")
        return Diagnosis("owner_limit", f"It waits its turn among {whose} jobs: {has} "
                         f"{f.owner_places} job(s) running or sent to a worker, as many as one "
                         f"owner may at once (SWITCHYARD_OWNER_MAX_ACTIVE={f.owner_cap}), and "
                         f"{f.owner_ahead} of {whose} waiting job(s) go before it"
                         f"{_tied(f.owner_tied, 'due')}; it is sent as they end.")
    if f.concurrency_key and f.key_at_limit:
        holders = _peers(f.key_holders) if f.key_holders else ""
        if len(f.key_holders) < f.concurrency_limit:
            holders += " and " if holders else ""
            holders += "jobs of other tenants"
        return Diagnosis("concurrency_limit", f"It waits for a free slot under concurrency key "
                         f"{f.concurrency_key!r} (limit {f.concurrency_limit}), held by "
                         f"{holders}.")
    if not f.queue_consumers:
        return Diagnosis("no_worker", f"No live worker consumes queue {f.queue!r}; start one "
                         f"with `switchyard worker -Q {f.queue}`.")
    published = (f" Its wake-up was published {ago(f.now, f.dispatched_at)}."
                 if f.dispatched_at else " It is not sent to a worker yet: the dispatch sweep "
                 f"(every {f.sweep_seconds:g}s) sends it." + _sweeps_note(f))
    ahead = (f"{f.queued_ahead} of your job(s) sent before it" if f.scoped
             else f"{f.queued_ahead} job(s) sent before it") + _tied(f.queued_tied, "sent")
    if f.others_ahead:
        ahead += " and jobs of other tenants"
    return Diagnosis("queued", f"It is queued on {f.queue!r} behind {ahead}; "
                     f"{f.queue_consumers} live worker(s) consume that queue.{published}")


def _tied(n: int, what: str) -> str:
    return f" (and up to {n} {what} at the same moment)" if n else ""


FACTS = """
SELECT now() AS now, j.id::text AS id, j.job_type, j.status, j.queue, j.attempts,
    j.max_attempts, j.run_after, j.last_error, j.locked_by, j.heartbeat_at,
    w.last_seen_at AS worker_seen_at, j.wake_at, j.wait_reason, j.completed_at,
    j.dispatched_at, j.cancel_requested, j.concurrency_key, j.concurrency_limit,
    s.name AS current_step, s.started_at AS step_started_at,
    j.wait_for, j.priority, j.project_id,
    (SELECT ran_at FROM sweep_runs WHERE sweep = 'dispatch_due' ORDER BY tick DESC LIMIT 1)
        AS sweeps_seen_at
FROM agent_jobs j
LEFT JOIN worker_heartbeats w ON w.worker = j.locked_by AND j.status = 'running'
LEFT JOIN LATERAL (SELECT name, started_at FROM job_steps
                   WHERE job_id = j.id AND status = 'running' ORDER BY seq DESC LIMIT 1) s ON true
WHERE j.id = %s
"""


# In its queue, the jobs a worker takes before it: the broker's order, highest priority first,
# then as sent (a job not sent yet goes behind every one sent).
# Jobs sent in one statement share its time: which of them a worker takes first is the
# broker's, so they are counted apart (`tied`, the job itself left out).
AHEAD = f"""
SELECT count(*) FILTER (WHERE {visible_to("j")} AND NOT tie) AS ahead,
    count(*) FILTER (WHERE {visible_to("j")} AND tie) AS tied,
    COALESCE(bool_or(NOT {visible_to("j")}), false) AS others_ahead
FROM agent_jobs j
CROSS JOIN LATERAL (SELECT j.priority = %(priority)s
                           AND j.dispatched_at = COALESCE(%(sent)s, now()) AS tie) t
WHERE {due("j")} AND j.queue = %(queue)s AND j.dispatched_at IS NOT NULL AND j.id <> %(id)s
  AND (j.priority > %(priority)s OR (j.priority = %(priority)s
                                     AND j.dispatched_at <= COALESCE(%(sent)s, now())))
"""

# A job held back by its owner's cap (tasks.engine.fair): the places its owner holds, and its
# owner's held-back due jobs that go out before it (fair.PICK's order: priority, then due time;
# those due at the same moment, a batch's, in no set order: counted apart as `tied`).
# Nothing when the project has no owner (the system's jobs are never held).
OWNER_TURN = f"""
WITH mine AS MATERIALIZED ({fair.MINE})
SELECT {fair.held_in("mine")} AS places, a.ahead, a.tied
FROM (SELECT count(*) FILTER (WHERE j.run_after < %(run_after)s
                                    OR j.priority > %(priority)s) AS ahead,
             count(*) FILTER (WHERE j.run_after = %(run_after)s
                                    AND j.priority = %(priority)s) AS tied
      FROM mine m JOIN agent_jobs j ON j.project_id = m.id
      WHERE {fair.unpublished("j")} AND j.run_after <= now() AND j.id <> %(id)s
        AND (j.priority > %(priority)s OR (j.priority = %(priority)s
                                           AND j.run_after <= %(run_after)s))) a
WHERE EXISTS (SELECT FROM mine)
"""


def gather(job_id: uuid.UUID | str, viewer: uuid.UUID | None) -> Facts | None:
    """The facts about one job; other jobs only as far as `viewer` (an owner id) may see
    them, or all of them for None (an admin token)."""
    row = pg.fetch_one_dict(FACTS, (job_id,))
    if row is None:
        return None
    settings = get_settings()
    status, queue, ckey = row["status"], row["queue"], row["concurrency_key"]
    waiting_on = key_holders = []
    at_limit = others_ahead = False
    consumers = ahead = 0
    cap = places = owner_ahead = owner_tied = tied = 0
    if status == JobStatus.WAITING and row["wait_for"]:
        waiting_on = _peer_rows("j.id = ANY(%(ids)s) AND j.status <> ALL(%(terminal)s)",
                                {"ids": row["wait_for"],
                                 "terminal": [t.value for t in TERMINAL]},
                                viewer)
    if status == JobStatus.QUEUED:
        if ckey:
            key_holders = _peer_rows(running_under_key("%(key)s", "j"), {"key": ckey}, viewer)
            at_limit = pg.fetch_value(  # all holders, however many the viewer may see
                f"SELECT count(*) >= %(limit)s FROM agent_jobs j "
                f"WHERE {running_under_key('%(key)s', 'j')}",
                {"limit": row["concurrency_limit"], "key": ckey})
        consumers = pg.fetch_value(
            "SELECT count(*) FROM worker_heartbeats WHERE stopped_at IS NULL "
            "AND last_seen_at > now() - make_interval(secs => %s) AND queues ? %s",
            (settings.stale_after_seconds, queue))
        found = pg.fetch_one_dict(AHEAD, {
            "queue": queue, "priority": row["priority"], "sent": row["dispatched_at"],
            "viewer": viewer, "id": row["id"]})
        assert found is not None  # an aggregate always returns its one row
        ahead, tied, others_ahead = found["ahead"], found["tied"], found["others_ahead"]
        if row["dispatched_at"] is None and fair.cap():
            turn = pg.fetch_one_dict(OWNER_TURN, {
                "project": row["project_id"], "priority": row["priority"],
                "run_after": row["run_after"], "id": row["id"]})
            if turn is not None:
                cap, places = fair.cap(), turn["places"]
                owner_ahead, owner_tied = turn["ahead"], turn["tied"]
    facts = {k: v for k, v in row.items() if k not in {"wait_for", "priority", "project_id"}}
    return Facts(**facts, waiting_on=waiting_on, key_holders=key_holders, key_at_limit=at_limit,
                 queue_consumers=consumers, queued_ahead=ahead, others_ahead=others_ahead,
                 queued_tied=tied, owner_cap=cap, owner_places=places, owner_ahead=owner_ahead,
                 owner_tied=owner_tied,
                 scoped=viewer is not None, stale_after_seconds=settings.stale_after_seconds,
                 sweep_seconds=settings.sweep_seconds)


def _peer_rows(condition: str, params: dict[str, Any], viewer: uuid.UUID | None) -> list[Peer]:
    rows = pg.fetch_dicts(f"SELECT j.id::text AS id, j.job_type, j.status FROM agent_jobs j "
                          f"WHERE {condition} AND {visible_to('j')} ORDER BY j.created_at LIMIT 50",
                          {**params, "viewer": viewer})
    return [Peer(id=r["id"], job_type=r["job_type"], status=r["status"]) for r in rows]


def as_json(f: Facts, d: Diagnosis) -> dict[str, Any]:
    facts = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(f).items()
             if k not in {"now", "id"}}
    return {"job_id": f.id, "status": f.status, "reason": d.reason, "summary": d.summary,
            "facts": facts, "checked_at": f.now.isoformat()}
