"""GitHub says a pull request closed: the merge gates waiting on it are decided.

Merged: approved; closed unmerged: rejected. Only the project's own pending `pr_merge`
approvals for that exact pull request URL are touched, so a delivery (signed with the
project's secret) can settle nothing of another project's; a redelivery finds nothing
pending and decides nothing twice.
"""

from __future__ import annotations

from typing import Any

from tasks.engine import pg
from tasks.engine.sql import pending_approval
from tasks.services import approvals

PR_MERGE = "pr_merge"  # the action type of a pull request's merge: a gate, no effect

WAITING = f"""
SELECT a.id, a.version, p.owner_id FROM approvals a JOIN projects p ON p.id = a.project_id
WHERE a.project_id = %(project)s AND a.action_type = %(action)s
  AND a.action_args ->> 'pr_url' = %(url)s AND {pending_approval('a')}
"""


def closed_pull_request(doc: dict[str, Any]) -> tuple[str, bool] | None:
    """(html_url, merged) of a `pull_request` delivery whose action is `closed`, else None."""
    pr = doc.get("pull_request")
    if doc.get("action") != "closed" or not isinstance(pr, dict):
        return None
    url = pr.get("html_url")
    return (url, pr.get("merged") is True) if isinstance(url, str) and url else None


def settle(project_id: str, url: str, merged: bool) -> list[str]:
    """Decide the project's merge gates of `url`; returns the approvals decided."""
    decided = []
    rows = pg.fetch_dicts(WAITING, {"project": project_id, "action": PR_MERGE,
                                    "url": url})
    for row in rows:
        try:
            approvals.decide(row["id"], row["owner_id"], "approved" if merged else "rejected",
                             row["version"])
        except approvals.ApprovalConflict:
            continue  # decided meanwhile (a person, or a concurrent delivery)
        decided.append(str(row["id"]))
    return decided
