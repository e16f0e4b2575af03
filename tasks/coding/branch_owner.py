"""Who may clone a branch the agent pushed to a shared local repository.

A local repository (SWITCHYARD_LOCAL_REPOS) is the operator's, and any tenant may clone it
and have the agent push there: so it holds every tenant's branches. One the agent made
(`switchyard/<first 8 of the job id>-…`, tasks.coding.git.branch_name) is cloned only for
the owner of a job it could have been made for, else another tenant would work on, and
read, that owner's code.

Known limits: the name carries 32 bits of the job's id, so another owner's job starting
with the same 8 hex digits passes (one chance in 4 billion a job); and a branch whose job
retention has deleted is refused to its owner too.
"""

from __future__ import annotations

from typing import Any

from tasks.coding import git
from tasks.engine import pg
from tasks.engine.errors import PermanentError

# Whether the owner of project %(project)s has a job whose id lies in [lo, hi]: a range of
# the primary key, the ids that start with the 8 hex digits a branch's name carries.
OWNER_HAS_JOB_IN = """
SELECT EXISTS (
    SELECT 1 FROM agent_jobs j JOIN projects p ON p.id = j.project_id
    WHERE j.id BETWEEN %(lo)s AND %(hi)s
      AND p.owner_id = (SELECT owner_id FROM projects WHERE id = %(project)s))
"""


def check(project_id: Any, branch: str) -> None:
    """PermanentError when `branch`, of a local repository, is one the agent made for a job
    of someone other than the project's owner (or for no job at all)."""
    prefix = git.made_for_job(branch)
    if prefix is None:
        return
    mine = pg.fetch_value(OWNER_HAS_JOB_IN, {
        "lo": f"{prefix}-0000-0000-0000-000000000000",
        "hi": f"{prefix}-ffff-ffff-ffff-ffffffffffff", "project": str(project_id)})
    if not mine:
        raise PermanentError(f"branch {branch!r}: no job of yours made it, and in a shared "
                             "local repository a branch the agent pushed is cloned only for "
                             "its owner")
