"""A file-tree summary of the plan's repository, for the planner's and the prompter's eyes:
a clone (the coding agent's, with its checks on the URL and its token rules) listed, then
removed. A repository that cannot be read for good leaves the plan without a tree, and says why."""

from __future__ import annotations

from typing import Any

from tasks.coding import git
from tasks.coding.tokens import token_for
from tasks.coding.workspace import workspace_for
from tasks.engine.errors import PermanentError
from tasks.planner.prompter import file_tree_summary
from tasks.settings import get_settings


def file_tree(project_id: Any, job_id: Any, repo_url: str) -> dict[str, Any]:
    """{"tree": the summary or None, "files": how many, "error": why there is none}."""
    dest = workspace_for(f"{job_id}-plan").root
    try:
        source = git.check_source(repo_url, list(get_settings().local_repos))
        git.clone(source, dest, token=token_for(project_id, source))
        files = git.tracked_files(dest)
    except PermanentError as exc:  # a passing failure (RetryableError) retries the step
        return {"tree": None, "files": 0, "error": str(exc)[:500]}
    finally:
        git.remove(dest)
    return {"tree": file_tree_summary(files), "files": len(files), "error": None}
