"""Approvals bound to their effect: exact arguments and their hash, a version, an expiry.

Approving writes the decision and the `approval.execute` job (key `approval:{id}`)
in one transaction, so two approvals, concurrent or not, enqueue one execution.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from tasks import pg
from tasks.enqueue import EnqueueRequest, enqueue
from tasks.errors import SwitchyardError
from tasks.sql import pending_approval

DEFAULT_TTL = timedelta(days=7)


class ApprovalConflict(SwitchyardError):
    """The decision saw an old version, or the approval is no longer pending."""


class ApprovalNotFound(SwitchyardError):
    pass


def args_hash(action_type: str, args: dict[str, Any]) -> str:
    canonical = json.dumps({"action_type": action_type, "args": args}, sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class NewApproval:
    action_type: str
    title: str
    args: dict[str, Any]


def create_approval(project_id: uuid.UUID | str, source_job_id: uuid.UUID | str | None,
                    action: NewApproval, *, force_new: bool = False,
                    ttl: timedelta = DEFAULT_TTL) -> uuid.UUID:
    """Create once per (project, source job, exact action). Unless forced, an identical action
    still pending in the project is reused rather than asked again."""
    digest = args_hash(action.action_type, action.args)
    if not force_new:
        row = pg.fetch_one(f"SELECT id FROM approvals WHERE project_id = %s AND args_hash = %s "
                           f"AND {pending_approval()} ORDER BY created_at LIMIT 1",
                           (project_id, digest))
        if row is not None:
            return row[0]
    row = pg.fetch_one(
        "INSERT INTO approvals (id, project_id, source_job_id, action_type, title, action_args, "
        "args_hash, expires_at) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, now() + %s) "
        "ON CONFLICT (project_id, source_job_id, args_hash) DO NOTHING RETURNING id",
        (uuid.uuid4(), project_id, source_job_id, action.action_type, action.title,
         json.dumps(action.args), digest, ttl))
    if row is not None:
        return row[0]
    row = pg.fetch_one("SELECT id FROM approvals WHERE project_id = %s AND source_job_id = %s "
                       "AND args_hash = %s", (project_id, source_job_id, digest))
    assert row is not None
    return row[0]


DECIDE = f"""
UPDATE approvals SET status = %(decision)s, version = version + 1, decided_at = now(),
    decided_by = %(owner)s, updated_at = now()
WHERE id = %(id)s AND version = %(version)s AND {pending_approval()}
RETURNING project_id, action_type
"""


def decide(approval_id: uuid.UUID | str, owner_id: uuid.UUID | str, decision: str,
           version: int) -> uuid.UUID | None:
    """Record a decision made against `version`; returns the execution job id when approved."""
    if decision not in ("approved", "rejected"):
        raise ValueError("decision must be 'approved' or 'rejected'")
    job = None
    with pg.transaction():
        row = pg.fetch_one(DECIDE, {"id": approval_id, "decision": decision,
                                    "owner": owner_id, "version": version})
        if row is not None and decision == "approved":
            job = enqueue(EnqueueRequest(project_id=row[0], job_type="approval.execute",
                                         payload={"approval_id": str(approval_id)},
                                         idempotency_key=f"approval:{approval_id}"),
                          publish=False)
            pg.fetch("UPDATE approvals SET execution_status = 'queued', execution_job_id = %s "
                     "WHERE id = %s AND execution_status = 'idle'", (job.job_id, approval_id))
    if row is None:
        raise ApprovalConflict(_why_not(approval_id, version))
    if job is not None:
        job.publish()
    return job.job_id if job else None


def _why_not(approval_id: uuid.UUID | str, version: int) -> str:
    row = pg.fetch_one("SELECT status, version, expires_at < now() FROM approvals WHERE id = %s",
                       (approval_id,))
    if row is None:
        raise ApprovalNotFound(f"approval {approval_id} does not exist")
    status, current, expired = row
    if status == "pending" and expired:
        pg.fetch("UPDATE approvals SET status = 'expired', version = version + 1, "
                 "updated_at = now() WHERE id = %s AND status = 'pending'", (approval_id,))
        return "the approval has expired"
    if current != version:
        return f"the approval changed (version {current}, the decision saw {version}); reload it"
    return f"the approval is already {status}"


# Run by the sweeps: pending approvals past their expiry leave the inbox as expired.
EXPIRE_DUE = """
UPDATE approvals SET status = 'expired', version = version + 1, updated_at = now()
WHERE id IN (SELECT id FROM approvals WHERE status = 'pending' AND expires_at <= now()
             LIMIT 500 FOR UPDATE SKIP LOCKED)
RETURNING id
"""
