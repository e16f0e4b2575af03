"""Plans in PostgreSQL, laid out as the Conductor lays them: a plan row, its tasks per
version and their dependencies. Every function is one unit of work of its own (or joins the
transaction it is called in); a status change is guarded by the statuses it may leave."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.engine.errors import SwitchyardError
from tasks.engine.sql import approval_status, lit, pending_approval
from tasks.engine.status import TERMINAL, sql_list
from tasks.services import approvals

Id = uuid.UUID | str
TERMINAL_PLAN = ("completed", "failed", "rejected", "canceled")
_ENDED = "(" + ", ".join(map(lit, TERMINAL_PLAN)) + ")"
PLAN_COLUMNS = ("id, project_id, name, goal, repo_url, github_repo, status, version, "
                "auto_approve, complete_on_merge, job_id, approval_id, error, "
                "created_at, updated_at")
# A plan with how many times it was revised (its `revised` versions) and its job's status and
# error (job_status, job_error), in one read: a plan whose job ended without ending the plan
# (canceled, out of attempts) reads as the job's end.
PLAN_READ = ("SELECT " + ", ".join(f"p.{c.strip()}" for c in PLAN_COLUMNS.split(",")) +
             ", (SELECT count(*) FROM plan_versions v WHERE v.plan_id = p.id "
             "AND v.origin = 'revised')::int AS revisions"
             ", j.status AS job_status, j.last_error AS job_error "
             "FROM plans p LEFT JOIN agent_jobs j ON j.id = p.job_id")


class PlanConflict(SwitchyardError):
    """The plan is not in a state that allows the change (e.g. edited after approval)."""

    http_status, code = 409, "plan_not_editable"


def create(project_id: Id, *, name: str, goal: str, repo_url: str | None,
           github_repo: str | None, auto_approve: bool, complete_on_merge: bool
           ) -> tuple[uuid.UUID, uuid.UUID]:
    """A plan and the job that writes it, committed together; (plan id, job id)."""
    plan_id = uuid.uuid4()
    with pg.transaction():
        job = enqueue(EnqueueRequest(project_id, "plan.generate", {"plan_id": str(plan_id)},
                                     idempotency_key=f"plan:{plan_id}"), publish=False)
        insert_plan(plan_id, project_id, name=name, goal=goal, repo_url=repo_url,
                    github_repo=github_repo, auto_approve=auto_approve,
                    complete_on_merge=complete_on_merge, job_id=job.job_id)
    job.publish()
    return plan_id, job.job_id


def insert_plan(plan_id: Id, project_id: Id, *, name: str, goal: str, repo_url: str | None,
                github_repo: str | None, auto_approve: bool, complete_on_merge: bool,
                job_id: Id) -> None:
    pg.execute("INSERT INTO plans (id, project_id, name, goal, repo_url, github_repo, "
               "auto_approve, complete_on_merge, job_id) "
               "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
               (str(plan_id), str(project_id), name, goal, repo_url, github_repo, auto_approve,
                complete_on_merge, str(job_id)))


def load(plan_id: Id) -> dict[str, Any] | None:
    return pg.fetch_one_dict(f"{PLAN_READ} WHERE p.id = %s", (str(plan_id),))


# A version's tasks (in their order) and their dependencies: one statement each.
INSERT_TASKS = """
INSERT INTO plan_tasks (id, plan_id, version, task_key, position, description, assigned_to,
                        status, job_id, output, error)
SELECT t.id, %(plan)s::uuid, %(version)s, t.key, t.n - 1, t.description, t.role, t.status, t.job,
       t.output, t.error
FROM unnest(%(ids)s::uuid[], %(keys)s::text[], %(descriptions)s::text[], %(roles)s::text[],
            %(statuses)s::text[], %(jobs)s::uuid[], %(outputs)s::jsonb[], %(errors)s::text[])
     WITH ORDINALITY AS t(id, key, description, role, status, job, output, error, n)
"""
INSERT_DEPS = """
INSERT INTO plan_task_deps (plan_id, version, task_key, depends_on_key)
SELECT %(plan)s::uuid, %(version)s, e.key, e.dep
FROM unnest(%(keys)s::text[], %(deps)s::text[]) AS e(key, dep)
"""


def save_version(plan_id: Id, version: int, origin: str, reason: str | None,
                 tasks: Sequence[dict[str, Any]]) -> bool:
    """Store `tasks` as version `version` and make it the plan's current one. Once: a retried
    call finds the version there and writes nothing (False). A task may carry a status,
    output and job id (completed tasks kept across a revision)."""
    with pg.transaction():
        created = pg.fetch_one_dict(
            "INSERT INTO plan_versions (plan_id, version, origin, reason) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING RETURNING version", (str(plan_id), version, origin, reason))
        if created is None:
            return False
        pg.execute(INSERT_TASKS, {
            "plan": str(plan_id), "version": version,
            "ids": [uuid.uuid4() for _ in tasks], "keys": [t["id"] for t in tasks],
            "descriptions": [t["description"] for t in tasks],
            "roles": [t["assigned_to"] for t in tasks],
            "statuses": [t.get("status", "pending") for t in tasks],
            "jobs": [t.get("job_id") for t in tasks],
            "outputs": [json.dumps(t["output"]) if t.get("output") is not None else None
                        for t in tasks],
            "errors": [t.get("error") for t in tasks]})
        edges = [(t["id"], dep) for t in tasks for dep in t["depends_on"]]
        if edges:
            pg.execute(INSERT_DEPS, {"plan": str(plan_id), "version": version,
                                     "keys": [k for k, _ in edges], "deps": [d for _, d in edges]})
        pg.execute("UPDATE plans SET version = %s, updated_at = now() WHERE id = %s",
                   (version, str(plan_id)))
    return True


TASKS = """
SELECT t.task_key AS id, t.description, t.assigned_to, t.status, t.job_id, t.output, t.error,
       coalesce(array_agg(d.depends_on_key ORDER BY d.depends_on_key)
                          FILTER (WHERE d.depends_on_key IS NOT NULL), '{}') AS depends_on
FROM plan_tasks t
LEFT JOIN plan_task_deps d ON d.plan_id = t.plan_id AND d.version = t.version
     AND d.task_key = t.task_key
WHERE t.plan_id = %s AND t.version = %s
GROUP BY t.id ORDER BY t.position
"""


def tasks_of(plan_id: Id, version: int) -> list[dict[str, Any]]:
    """A version's tasks in their order, each with its dependencies (JSON-able)."""
    rows = pg.fetch_dicts(TASKS, (str(plan_id), version))
    for row in rows:
        row["job_id"] = str(row["job_id"]) if row["job_id"] else None
        row["depends_on"] = list(row["depends_on"])
    return rows


def versions_of(plan_id: Id) -> list[dict[str, Any]]:
    return pg.fetch_dicts("SELECT version, origin, reason, created_at FROM plan_versions "
                          "WHERE plan_id = %s ORDER BY version", (str(plan_id),))


def set_status(plan_id: Id, status: str, *, error: str | None = None) -> bool:
    """Move a plan that has not ended to `status`; False if it had already ended."""
    row = pg.fetch_one_dict(
        "UPDATE plans SET status = %s, error = coalesce(%s, error), updated_at = now() "
        f"WHERE id = %s AND status NOT IN {_ENDED} "
        "RETURNING id", (status, error, str(plan_id)))
    return row is not None


def mirror(plan_id: Id, version: int, states: dict[str, dict[str, Any]]) -> None:
    """Copy the run's view of each task ({"status", "job_id", "output", "error"}, the task
    statuses of plan_tasks) into the version's rows, in one statement."""
    if not states:
        return
    keys = list(states)
    pg.execute(
        "UPDATE plan_tasks t SET status = s.status, job_id = coalesce(s.job_id, t.job_id), "
        "output = coalesce(s.output, t.output), error = coalesce(s.error, t.error), "
        "updated_at = now() "
        "FROM unnest(%s::text[], %s::text[], %s::uuid[], %s::jsonb[], %s::text[]) "
        "AS s(key, status, job_id, output, error) "
        "WHERE t.plan_id = %s AND t.version = %s AND t.task_key = s.key "
        "AND (t.status, t.job_id, t.output, t.error) IS DISTINCT FROM "
        "(s.status, coalesce(s.job_id, t.job_id), coalesce(s.output, t.output), "
        "coalesce(s.error, t.error))",
        (keys, [states[k]["status"] for k in keys], [states[k].get("job_id") for k in keys],
         [json.dumps(states[k]["output"]) if states[k].get("output") is not None else None
          for k in keys], [states[k].get("error") for k in keys], str(plan_id), version))


# --- approval -----------------------------------------------------------------------------

APPROVAL_STATE = f"""
SELECT p.approval_id, {approval_status("a")} AS status,
       (a.action_args ->> 'version')::int AS version
FROM plans p JOIN approvals a ON a.id = p.approval_id WHERE p.id = %s
"""


def approval_state(plan_id: Id) -> dict[str, Any]:
    """The plan's current approval: {"approval_id", "status", "version"} (status `expired`
    for a pending one past its expiry)."""
    row = pg.fetch_one_dict(APPROVAL_STATE, (str(plan_id),))
    if row is None:
        raise PlanConflict(f"plan {plan_id} has no approval")
    return {"approval_id": str(row["approval_id"]), "status": row["status"],
            "version": row["version"]}


def attach_approval(plan_id: Id, approval_id: Id) -> None:
    pg.execute("UPDATE plans SET approval_id = %s, status = 'awaiting_approval', "
               "updated_at = now() WHERE id = %s AND status IN ('generating', 'awaiting_approval')",
               (str(approval_id), str(plan_id)))


def lock_for_edit(plan_id: Id) -> dict[str, Any]:
    """The plan row, locked until the transaction ends; PlanConflict unless it awaits approval."""
    row = pg.fetch_one_dict(f"SELECT {PLAN_COLUMNS} FROM plans WHERE id = %s FOR UPDATE",
                            (str(plan_id),))
    assert row is not None
    if row["status"] != "awaiting_approval" or row["approval_id"] is None:
        raise PlanConflict(f"the plan is {row['status']}: only a plan awaiting approval can be "
                           "edited")
    return row


def supersede_approval(approval_id: Id) -> None:
    """The pending approval gives way to an edited plan's (PlanConflict if already decided)."""
    if not approvals.expire(f"id = %s AND {pending_approval()}", (str(approval_id),)):
        raise PlanConflict("the plan's approval was decided (or expired) meanwhile; reload it")


# --- reads for the API --------------------------------------------------------------------

def listing(project_id: Id, limit: int = 100) -> list[dict[str, Any]]:
    return pg.fetch_dicts(f"{PLAN_READ} WHERE p.project_id = %s "
                          "ORDER BY p.created_at DESC, p.id LIMIT %s", (str(project_id), limit))


def ended_jobs(job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Of `job_ids`, the jobs that ended: {id: {"status", "result", "last_error"}}."""
    if not job_ids:
        return {}
    rows = pg.fetch_dicts("SELECT id::text AS id, status, result, last_error FROM agent_jobs "
                          f"WHERE id = ANY(%s::uuid[]) AND status IN {sql_list(TERMINAL)}",
                          (list(job_ids),))
    return {r.pop("id"): r for r in rows}
