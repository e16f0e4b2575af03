"""`code.run_task_until_merged`: a coding task that is done only when its pull request is
merged (a plan's `complete_on_merge`). The coding agent runs as a child; its pull request
becomes a gate approval that GitHub's `pull_request` webhook decides (merged: approved,
closed unmerged: rejected), so the job waits for GitHub durably, like any wait."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tasks.coding.merges import PR_MERGE
from tasks.coding.payloads import RunTaskPayload
from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.engine.sql import approval_status
from tasks.services import approvals

MERGE_TTL = timedelta(days=30)  # a pull request left open longer ends the wait as expired


def handle(ctx: JobContext, p: RunTaskPayload) -> dict[str, Any]:
    if not p.github_repo:
        raise PermanentError("waiting for a merge needs github_repo: without it no pull "
                             "request is opened")
    child = ctx.spawn("code.run_task", p.model_dump(exclude_none=True))
    (outcome,) = ctx.wait([child])
    if outcome.status != "completed":
        raise PermanentError(f"the coding task {outcome.status}: {outcome.error}")
    result: dict[str, Any] = dict(outcome.result or {})
    pr_url = result.get("pr_url")
    if not pr_url:  # nothing changed: nothing to merge
        return {**result, "merged": None}
    action = approvals.NewApproval(PR_MERGE, f"Merge {pr_url}"[:300],
                                   {"pr_url": pr_url, "github_repo": p.github_repo},
                                   on_approve=approvals.GATE)
    gate = ctx.step("await-merge", lambda: str(approvals.create_approval(
        ctx.project_id, ctx.job_id, action, force_new=True, ttl=MERGE_TTL)))
    ctx.wait_any([], [gate])
    status = ctx.step("merge-decision", lambda: pg.fetch_value(
        f"SELECT {approval_status('o')} FROM approvals o WHERE o.id = %s", (gate,)))
    if status != "approved":
        why = "closed without being merged" if status == "rejected" else f"not merged ({status})"
        raise PermanentError(f"the pull request {pr_url} was {why}")
    return {**result, "merged": True}
