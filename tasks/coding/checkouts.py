"""When a job's checkout goes: as soon as the job ends in any state, and, for what a killed
worker left behind, a sweep of checkouts whose job has ended or is gone."""

from __future__ import annotations

import logging
import os
import time
import uuid

from tasks.coding import git
from tasks.coding.workspace import workspace_for
from tasks.engine import pg
from tasks.engine.status import TERMINAL
from tasks.settings import get_settings

log = logging.getLogger(__name__)
ORPHAN_AGE_SECONDS = 24 * 3600  # older than a day, and no live job: nobody will come back


def release(job_id: str) -> None:
    """The job has ended: its checkout and repository go (the branch and the patch artifact
    keep what it made; a manual retry clones again)."""
    git.remove(workspace_for(job_id).root)
    log.info("checkout removed", extra={"action": "checkout_removed", "job_id": job_id})


def remove_orphans(max_age: float = ORPHAN_AGE_SECONDS) -> int:
    """Remove checkouts untouched for `max_age` seconds whose job is not live; how many."""
    parent = get_settings().workspaces_dir
    if not parent.is_dir():
        return 0
    cutoff = time.time() - max_age
    stale: dict[str, list[str]] = {}
    for entry in os.scandir(parent):
        job = entry.name.removesuffix(".git")
        if _is_uuid(job) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
            stale.setdefault(job, []).append(entry.name)
    if not stale:
        return 0
    live = {str(r["id"]) for r in pg.fetch_dicts(
        "SELECT id FROM agent_jobs WHERE id = ANY(%s::uuid[]) AND status <> ALL(%s::text[])",
        (list(stale), [s.value for s in TERMINAL]))}
    removed = 0
    for job in stale.keys() - live:
        git.remove(parent / job)
        removed += 1
    if removed:
        log.info("orphan checkouts removed", extra={"action": "orphans_removed",
                                                    "count": removed})
    return removed


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False
