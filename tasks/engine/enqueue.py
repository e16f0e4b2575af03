"""Idempotent, race-safe enqueue: insert the row and its event in one statement, then publish."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from tasks.engine import fair, pg, registry, telemetry
from tasks.engine.dispatch import dispatch_many, dispatch_quietly
from tasks.engine.errors import InvalidPayload, PermanentError, SwitchyardError
from tasks.engine.queues import DEFAULT_PRIORITY, MAX_PRIORITY
from tasks.engine.sql import lit, status_event
from tasks.engine.storable import to_json
from tasks.settings import get_settings


class ProjectNotFound(SwitchyardError):
    http_status, code = 404, "not_found"

    def __init__(self, message: str = "project not found"):
        super().__init__(message)


@dataclass(frozen=True)
class EnqueueRequest:
    project_id: uuid.UUID | str
    job_type: str
    payload: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    priority: int | None = None
    run_after: datetime | None = None
    max_attempts: int | None = None
    parent_job_id: uuid.UUID | str | None = None
    concurrency_key: str | None = None
    concurrency_limit: int = 1
    timeout_seconds: int | None = None
    agent_key: str | None = None


@dataclass(frozen=True)
class Enqueued:
    job_id: uuid.UUID
    status: str
    created: bool
    queue: str = "default"
    priority: int = DEFAULT_PRIORITY

    def publish(self) -> None:
        """For callers that enqueued with publish=False inside their own transaction."""
        if self.created:
            dispatch_quietly(self.job_id, self.queue, self.priority)


# The project %(project_id)s is the owner %(owner)s's: the one spelling of the enqueue's check.
OWNED = "SELECT 1 FROM projects WHERE id = %(project_id)s::uuid AND owner_id = %(owner)s::uuid"

INSERT_JOB = f"""
WITH ins AS (
    INSERT INTO agent_jobs (id, project_id, job_type, agent_key, queue, priority, payload,
        idempotency_key, run_after, max_attempts, parent_job_id, concurrency_key,
        concurrency_limit, timeout_seconds, dispatched_at)
    SELECT %(id)s, %(project_id)s, %(job_type)s, %(agent_key)s, %(queue)s, %(priority)s,
        -- A run_after already past is now (GREATEST skips a NULL): a held-back job's place
        -- in its owner's order is its due time (tasks.engine.fair.PICK), not the client's.
        %(payload)s::jsonb, %(key)s, GREATEST(%(run_after)s::timestamptz, now()),
        %(max_attempts)s, %(parent)s::uuid, %(ckey)s::text, %(climit)s, %(timeout)s::int,
        CASE WHEN (%(run_after)s::timestamptz IS NULL OR %(run_after)s::timestamptz <= now())
                  AND {fair.publish_now("%(project_id)s::uuid")}
             THEN now() END
    -- A client's request names its owner: the project must be theirs (no row otherwise).
    WHERE %(owner)s::uuid IS NULL OR EXISTS ({OWNED})
    ON CONFLICT (project_id, idempotency_key) DO NOTHING
    RETURNING id, project_id, dispatched_at IS NOT NULL AS due
), ev AS ({status_event("ins", lit("queued"), "NULL::text")}
)
SELECT id, 'queued' AS status, true AS created, due FROM ins
"""

# How many jobs the tree a new child joins holds already (its root's descendants), counted
# no further than the ceiling: one request must not fan out into millions of jobs.
TREE_SIZE = """
WITH RECURSIVE up AS (
    SELECT id, parent_job_id, 0 AS depth FROM agent_jobs WHERE id = %(parent)s
    UNION ALL
    SELECT a.id, a.parent_job_id, up.depth + 1 FROM agent_jobs a JOIN up ON a.id = up.parent_job_id
    WHERE up.depth < 1000
), down AS (
    SELECT id FROM up WHERE parent_job_id IS NULL
    UNION ALL
    SELECT c.id FROM agent_jobs c JOIN down ON c.parent_job_id = down.id
)
SELECT count(*) - 1 AS n FROM (SELECT 1 FROM down LIMIT %(ceiling)s + 1) d
"""

SELECT_BY_KEY = """
SELECT id, status, false AS created, false AS due
FROM agent_jobs WHERE project_id = %s AND idempotency_key = %s
"""


def validate(req: EnqueueRequest, *, public: bool = False) -> tuple[registry.JobType, str]:
    """The one check of a request: its job type (a client's must be public), its payload
    (a client's strictly typed), its options; the payload as stored. Raises InvalidPayload,
    UnknownJobType or JobTypeUnavailable."""
    job_type = registry.get_public(req.job_type) if public else registry.get(req.job_type)
    payload = job_type.parse(req.payload, strict=public).model_dump(mode="json")
    if req.priority is not None and not 0 <= req.priority <= MAX_PRIORITY:
        raise InvalidPayload("priority must be between 0 and 9", details={"field": "priority"})
    if req.max_attempts is not None and not 1 <= req.max_attempts <= 100:
        raise InvalidPayload("max_attempts must be between 1 and 100",
                             details={"field": "max_attempts"})
    if req.concurrency_limit < 1:
        raise InvalidPayload("concurrency_limit must be >= 1",
                             details={"field": "concurrency_limit"})
    try:
        return job_type, to_json(payload, "the payload")
    except PermanentError as exc:  # NaN, Infinity, NUL: the insert would fail on it
        raise InvalidPayload(str(exc), details={"field": "payload"}) from None


def _check_tree(parent: uuid.UUID | str) -> None:
    ceiling = get_settings().max_descendants
    if ceiling and int(pg.fetch_value(TREE_SIZE, {"parent": parent, "ceiling": ceiling})) \
            >= ceiling:
        raise PermanentError(f"the job's tree already holds {ceiling} descendants of its root "
                             "(SWITCHYARD_MAX_DESCENDANTS): no more children")


def _prepare(req: EnqueueRequest, public: bool) -> dict[str, Any]:
    """A request checked (validate, the type's admission, the tree's size) and turned into
    its row's values: what enqueue and enqueue_many insert."""
    job_type, payload = validate(req, public=public)
    if job_type.admit is not None:
        job_type.admit(str(req.project_id), req.payload)
    if req.parent_job_id is not None:
        _check_tree(req.parent_job_id)
    priority = DEFAULT_PRIORITY if req.priority is None else req.priority
    # Priority orders an owner's own work; above the operator's ceiling it is lowered to it.
    priority = min(priority, get_settings().max_priority)
    return {
        "id": uuid.uuid4(), "project_id": req.project_id, "job_type": job_type.name,
        "agent_key": req.agent_key, "queue": job_type.queue, "priority": priority,
        "payload": payload, "key": req.idempotency_key or f"auto:{uuid.uuid4()}",
        "run_after": req.run_after, "max_attempts": req.max_attempts or job_type.max_attempts,
        "parent": req.parent_job_id, "ckey": req.concurrency_key,
        "climit": req.concurrency_limit,
        "timeout": req.timeout_seconds or job_type.timeout_seconds,
    }


def enqueue(req: EnqueueRequest, *, publish: bool = True, public: bool = False,
            owner: uuid.UUID | None = None) -> Enqueued:
    """Create the job once per (project, key); publish its wake-up after the commit.
    `public`: the request is a client's (validate(public=True)). `owner`: the caller, who
    must own the project (else ProjectNotFound); checked by the INSERT itself, which saves
    the hot path a round trip, or first when the job type's admission reads the project."""
    if owner is not None and registry.get(req.job_type).admit is not None:
        _require_owner(req.project_id, owner)
    params = _prepare(req, public) | {"cap": fair.cap(), "owner": owner}
    key = params["key"]
    try:
        row = pg.fetch_one_dict(INSERT_JOB, params)
    except psycopg.errors.ForeignKeyViolation:
        raise ProjectNotFound() from None
    if row is None:
        # Not the caller's project, or lost the race to a concurrent insert with the same
        # key: read its row (a new statement, so a new snapshot that sees the winner's commit).
        if owner is not None:
            _require_owner(req.project_id, owner)
        row = pg.fetch_one_dict(SELECT_BY_KEY, (req.project_id, key))
        if row is None:
            raise RuntimeError(f"job with key {key!r} neither inserted nor found")
    job_id, status, created, due = row["id"], row["status"], row["created"], row["due"]
    if created and (parent := telemetry.traceparent()) is not None:
        # Tracing on: the job's runs continue this trace (an UPDATE only then; off, free).
        pg.execute("UPDATE agent_jobs SET traceparent = %s WHERE id = %s", (parent, job_id))
    if created and due and publish:
        dispatch_quietly(job_id, params["queue"], params["priority"])
    return Enqueued(job_id=job_id, status=status, created=created, queue=params["queue"],
                    priority=params["priority"])


def owns_project(project_id: uuid.UUID | str, owner: uuid.UUID) -> bool:
    return pg.fetch_one_dict(OWNED, {"project_id": project_id, "owner": owner}) is not None


def _require_owner(project_id: uuid.UUID | str, owner: uuid.UUID) -> None:
    if not owns_project(project_id, owner):
        raise ProjectNotFound()


MAX_BATCH = 1000

# enqueue_many: one project's rows in one statement. The owner's free places are counted
# once, and the batch's first due rows take them (a row's place is its position).
_OWNER = "(SELECT owner_id FROM projects WHERE id = %(project_id)s::uuid)"
INSERT_MANY = f"""
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(ord int, id uuid, job_type text,
        agent_key text, queue text, priority int, payload text, key text,
        run_after timestamptz, max_attempts int, parent uuid, ckey text, climit int,
        timeout int)
), room AS MATERIALIZED (SELECT {fair.free_places(_OWNER)} AS n
), ins AS (
    INSERT INTO agent_jobs (id, project_id, job_type, agent_key, queue, priority, payload,
        idempotency_key, run_after, max_attempts, parent_job_id, concurrency_key,
        concurrency_limit, timeout_seconds, dispatched_at)
    SELECT i.id, %(project_id)s::uuid, i.job_type, i.agent_key, i.queue, i.priority,
        i.payload::jsonb, i.key, GREATEST(i.run_after, now()), -- INSERT_JOB says why
        i.max_attempts, i.parent,
        i.ckey, i.climit, i.timeout,
        CASE WHEN (i.run_after IS NULL OR i.run_after <= now())
                  AND i.ord <= (SELECT n FROM room) THEN now() END
    FROM input i ORDER BY i.ord
    ON CONFLICT (project_id, idempotency_key) DO NOTHING
    RETURNING id, project_id, idempotency_key, dispatched_at IS NOT NULL AS due
), ev AS ({status_event("ins", lit("queued"), "NULL::text")}
)
SELECT id, idempotency_key AS key, due FROM ins
"""
SELECT_BY_KEYS = ("SELECT id, idempotency_key AS key, status FROM agent_jobs "
                  "WHERE project_id = %s AND idempotency_key = ANY(%s)")


def enqueue_many(reqs: list[EnqueueRequest], *, public: bool = False
                 ) -> list[Enqueued | SwitchyardError]:
    """Enqueue many jobs: one statement per project, one publishing connection for all.

    Each request is checked on its own; the result at its position is its Enqueued (an
    idempotency key already used, in the project or earlier in the batch: the existing
    job, `created` False) or the error that refused it (nothing written for it).
    """
    if len(reqs) > MAX_BATCH:
        raise InvalidPayload(f"at most {MAX_BATCH} jobs in one batch",
                             details={"field": "jobs"})
    out: list[Enqueued | SwitchyardError | None] = [None] * len(reqs)
    by_project: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, req in enumerate(reqs):
        try:
            by_project.setdefault(str(req.project_id), []).append((i, _prepare(req, public)))
        except SwitchyardError as exc:
            out[i] = exc
    due: list[Enqueued] = []
    for project, rows in by_project.items():
        try:
            placed = _insert_many(project, [p for _, p in rows])
        except ProjectNotFound as exc:
            for i, _ in rows:
                out[i] = exc
            continue
        for (i, _), (enqueued, publish) in zip(rows, placed, strict=True):
            out[i] = enqueued
            if publish:
                due.append(enqueued)
    made = [o.job_id for o in out if isinstance(o, Enqueued) and o.created]
    if made and (parent := telemetry.traceparent()) is not None:
        pg.execute("UPDATE agent_jobs SET traceparent = %s WHERE id = ANY(%s)", (parent, made))
    if due:
        dispatch_many([(e.job_id, e.queue, e.priority) for e in due])
    return [o for o in out if o is not None]


def _insert_many(project: str, rows: list[dict[str, Any]]) -> list[tuple[Enqueued, bool]]:
    """Insert one project's prepared rows; (what each became, whether to publish it)."""
    payload = [{**{k: v for k, v in r.items() if k != "project_id"}, "ord": n + 1,
                "id": str(r["id"]), "parent": str(r["parent"]) if r["parent"] else None,
                "run_after": r["run_after"].isoformat() if r["run_after"] else None}
               for n, r in enumerate(rows)]
    try:
        inserted = pg.fetch_dicts(INSERT_MANY, {"rows": json.dumps(payload), "cap": fair.cap(),
                                                "project_id": project})
    except psycopg.errors.ForeignKeyViolation:
        raise ProjectNotFound() from None
    mine = {r["id"]: r for r in inserted}
    missing = [r["key"] for r in rows if r["id"] not in mine]
    existing = {r["key"]: r for r in pg.fetch_dicts(SELECT_BY_KEYS, (project, missing))} \
        if missing else {}
    out = []
    for r in rows:
        if r["id"] in mine:
            out.append((Enqueued(r["id"], "queued", True, r["queue"], r["priority"]),
                        bool(mine[r["id"]]["due"])))
            continue
        found = existing.get(r["key"])
        if found is None:
            raise RuntimeError(f"job with key {r['key']!r} neither inserted nor found")
        out.append((Enqueued(found["id"], found["status"], False, r["queue"], r["priority"]),
                    False))
    return out
