"""Approvals bound to their effect: exact arguments and their hash, a version, an expiry.

Approving writes the decision and the `approval.execute` job (key `approval:{id}`) in
one transaction, so two approvals, concurrent or not, enqueue one execution. A phase
advance is no effect: approving it enqueues the next phase's packet. What approving runs is
recorded on the row by the system that asks (`on_approve`), so every process agrees on it
without knowing the other systems' action types.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tasks.engine import pg
from tasks.engine.control import resume_if_ready
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.engine.errors import SwitchyardError
from tasks.engine.sql import pending_approval, unknown_effect_of_action
from tasks.engine.sweeps import Sweep, query
from tasks.services.effects.review import unknown_blocking_approval

DEFAULT_TTL = timedelta(days=7)

# What approving runs (the row's `on_approve`): the action, as an effect through the ledger;
# nothing, for a gate a job waits on (a workflow's step, a plan, a pull request's merge),
# which deciding wakes (source_job_id); or a job of the asking system's choice (run_job).
EFFECT: dict[str, Any] = {"run": "effect"}
GATE: dict[str, Any] = {"run": "nothing"}


def run_job(request: EnqueueRequest) -> dict[str, Any]:
    """Approving enqueues this job (its key makes approving twice one job)."""
    return {"run": "job", "job_type": request.job_type, "payload": request.payload,
            "idempotency_key": request.idempotency_key}


class ApprovalConflict(SwitchyardError):
    """The decision saw an old version, or the approval is no longer pending."""

    http_status, code = 409, "conflict"

    def details(self) -> dict[str, Any]:
        return {"field": "version"}


class ApprovalExpired(ApprovalConflict):
    """Still pending on the row, but past its expiry: deciding it is refused."""


class ApprovalNotFound(SwitchyardError):
    http_status, code = 404, "not_found"


def args_hash(action_type: str, args: dict[str, Any]) -> str:
    canonical = json.dumps({"action_type": action_type, "args": args}, sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class NewApproval:
    action_type: str
    title: str
    args: dict[str, Any]
    on_approve: dict[str, Any] = field(default_factory=lambda: dict(EFFECT))


def create_approval(project_id: uuid.UUID | str, source_job_id: uuid.UUID | str | None,
                    action: NewApproval, *, force_new: bool = False,
                    ttl: timedelta = DEFAULT_TTL) -> uuid.UUID:
    """Create once per (project, source job, exact action). Unless forced, an identical action
    still pending in the project is reused rather than asked again."""
    digest = args_hash(action.action_type, action.args)
    if not force_new:
        row = pg.fetch_one_dict(f"SELECT id FROM approvals WHERE project_id = %s "
                                f"AND args_hash = %s AND {pending_approval()} "
                                f"ORDER BY created_at LIMIT 1", (project_id, digest))
        if row is not None:
            return row["id"]
    row = pg.fetch_one_dict(
        "INSERT INTO approvals (id, project_id, source_job_id, action_type, title, action_args, "
        "args_hash, expires_at, on_approve) "
        "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, now() + %s, %s::jsonb) "
        "ON CONFLICT (project_id, source_job_id, args_hash) DO NOTHING RETURNING id",
        (uuid.uuid4(), project_id, source_job_id, action.action_type, action.title,
         json.dumps(action.args), digest, ttl, json.dumps(action.on_approve)))
    if row is not None:
        return row["id"]
    row = pg.fetch_one_dict("SELECT id FROM approvals WHERE project_id = %s "
                            "AND source_job_id = %s AND args_hash = %s",
                            (project_id, source_job_id, digest))
    assert row is not None
    return row["id"]


# A gate (it runs nothing itself) whose job was canceled: no decision can matter any more,
# so it leaves the inbox (expired) and a decision on it is refused. Only a cancel: a failed
# job may be retried, and its gate is the one it waits on again.
MOOT_GATE = ("approvals.on_approve->>'run' = 'nothing' AND EXISTS (SELECT 1 FROM agent_jobs "
             "g WHERE g.id = approvals.source_job_id AND g.status = 'canceled')")
GATE_CANCELED = "the job waiting on this approval was canceled: there is nothing to decide"

# Approving is refused while an earlier effect of the same action has an unknown outcome:
# a person resolves it first (services.effects.review), or the deploy or email may go out twice.
DECIDE = f"""
UPDATE approvals SET status = %(decision)s, version = version + 1, decided_at = now(),
    decided_by = %(owner)s, updated_at = now()
WHERE id = %(id)s AND version = %(version)s AND {pending_approval()}
  AND NOT (%(decision)s::text = 'approved' AND EXISTS ({unknown_effect_of_action("approvals")}))
  AND NOT ({MOOT_GATE})
RETURNING project_id, source_job_id, on_approve
"""


def decide(approval_id: uuid.UUID | str, owner_id: uuid.UUID | str, decision: str,
           version: int) -> uuid.UUID | None:
    """Record a decision made against `version`; returns the execution job id when approved.

    Raises ApprovalConflict, ApprovalNotFound, or UnknownEffectPending when an earlier effect
    of the same action has an unknown outcome (approving could do it twice)."""
    if decision not in ("approved", "rejected"):
        raise ValueError("decision must be 'approved' or 'rejected'")
    job = None
    with pg.transaction():
        row = pg.fetch_one_dict(DECIDE, {"id": approval_id, "decision": decision,
                                         "owner": owner_id, "version": version})
        request = (_execution(approval_id, row["project_id"], row["on_approve"])
                   if row is not None and decision == "approved" else None)
        if request is not None:
            job = enqueue(request, publish=False)
            pg.execute("UPDATE approvals SET execution_status = 'queued', execution_job_id = %s "
                       "WHERE id = %s AND execution_status = 'idle'", (job.job_id, approval_id))
    if row is None:
        refused = _why_not(approval_id, decision, version)
        if isinstance(refused, ApprovalExpired):  # leave the inbox now, not at the next sweep
            expire(f"id = %s AND {OVERDUE}", (approval_id,))
        elif str(refused) == GATE_CANCELED:
            expire(f"id = %s AND status = 'pending' AND {MOOT_GATE}", (approval_id,))
        raise refused
    if job is not None:
        job.publish()
    if row["source_job_id"] is not None:  # a job waiting on it resumes now, not at a sweep
        resume_if_ready(row["source_job_id"])
    return job.job_id if job else None


def _execution(approval_id: uuid.UUID | str, project_id: uuid.UUID,
               on_approve: dict[str, Any]) -> EnqueueRequest | None:
    """The job approving runs: the effect through the ledger, the job the row names, or
    none (a gate)."""
    if on_approve["run"] == "nothing":
        return None
    if on_approve["run"] == "job":
        return EnqueueRequest(project_id=project_id, job_type=on_approve["job_type"],
                              payload=on_approve["payload"],
                              idempotency_key=on_approve["idempotency_key"])
    return EnqueueRequest(project_id=project_id, job_type="approval.execute",
                          payload={"approval_id": str(approval_id)},
                          idempotency_key=f"approval:{approval_id}")


def _why_not(approval_id: uuid.UUID | str, decision: str, version: int) -> SwitchyardError:
    row = pg.fetch_one_dict(f"SELECT status, version, expires_at < now() AS expired, "
                            f"{MOOT_GATE} AS moot FROM approvals WHERE id = %s", (approval_id,))
    if row is None:
        return ApprovalNotFound(f"approval {approval_id} does not exist")
    status, current, expired = row["status"], row["version"], row["expired"]
    if status in ("pending", "expired") and row["moot"]:  # expired: by the cancel
        return ApprovalConflict(GATE_CANCELED)
    if status == "pending" and expired:
        return ApprovalExpired("the approval has expired")
    if current != version:
        return ApprovalConflict(f"the approval changed (version {current}, the decision saw "
                                f"{version}); reload it")
    if status == "pending" and decision == "approved":
        blocked = unknown_blocking_approval(str(approval_id))
        if blocked is not None:
            return blocked
    return ApprovalConflict(f"the approval is already {status}")


# Pending past its expiry, by the database's clock (sql.pending_approval is the converse).
OVERDUE = "status = 'pending' AND expires_at <= now()"


def expire_sql(condition: str) -> str:
    """The one way an approval expires: the approvals matching `condition`, pending or not
    (the condition says), leave the inbox as expired under a new version."""
    return (f"UPDATE approvals SET status = 'expired', version = version + 1, "
            f"updated_at = now() WHERE {condition} RETURNING id")


def expire(condition: str, params: tuple[Any, ...]) -> list[uuid.UUID]:
    return [row["id"] for row in pg.fetch_dicts(expire_sql(condition), params)]


def expire_gates_of(job_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """The gates of these jobs, just canceled, leave the inbox now rather than at a sweep."""
    return expire(f"source_job_id = ANY(%s) AND status = 'pending' AND {MOOT_GATE}",
                  (job_ids,)) if job_ids else []


# Run by the sweeps: pending approvals past their expiry, or gates of canceled jobs (a cancel
# that reached the job another way than the cancel route), leave the inbox as expired.
EXPIRE_DUE = expire_sql(f"id IN (SELECT id FROM approvals WHERE {OVERDUE} OR "
                        f"(status = 'pending' AND {MOOT_GATE}) "
                        "LIMIT 500 FOR UPDATE SKIP LOCKED)")
EXPIRE_SWEEP = Sweep("expire_approvals", query(EXPIRE_DUE))
