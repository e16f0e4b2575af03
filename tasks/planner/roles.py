"""Which job type does a plan task, by its role, and the payload that job type gets.

The map is the defaults below with SWITCHYARD_PLAN_ROLES over them; any other role goes to
`agent.task`, which answers with the model. A job type that cannot take a task (the coding
agent with no repository, a page check with no URL) hands it to `agent.task` and says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tasks.settings import get_settings

FALLBACK = "agent.task"
DEFAULT_ROLES: dict[str, str] = {
    "engineer": "code.run_task",
    "researcher": "research.generate_report",
    "qa": "browser.check_page",
}
UNTIL_MERGED = "code.run_task_until_merged"  # code.run_task, then the PR's merge
PROMPT_CHARS = 20_000  # code.run_task's cap on its task, and agent.task's
TOPIC_CHARS = 300  # research.generate_report's cap on its topic
_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")


@dataclass(frozen=True)
class Facts:
    """What the plan knows that a job may need besides the prompt."""

    repo_url: str | None = None
    github_repo: str | None = None
    complete_on_merge: bool = False  # a coding task is done when its pull request is merged


@dataclass(frozen=True)
class Dispatch:
    job_type: str
    payload: dict[str, Any]
    note: str | None = None  # why the role's own job type was not used


def role_map() -> dict[str, str]:
    return {**DEFAULT_ROLES, **dict(get_settings().plan_roles)}


def job_type_for(role: str, roles: dict[str, str] | None = None) -> str:
    return (roles if roles is not None else role_map()).get(role, FALLBACK)


def dispatch(role: str, prompt: str, description: str, facts: Facts,
             roles: dict[str, str] | None = None) -> Dispatch:
    """The job for a task of `role` whose prompt is `prompt` (tasks.planner.prompter)."""
    job_type = job_type_for(role, roles)
    if job_type == FALLBACK:
        return Dispatch(FALLBACK, _agent(prompt, role))
    built = BUILDERS.get(job_type, _generic)(prompt, description, facts)
    if isinstance(built, str):
        return Dispatch(FALLBACK, _agent(prompt, role), f"{job_type} cannot take it: {built}")
    if job_type == "code.run_task" and facts.complete_on_merge and "github_repo" in built:
        return Dispatch(UNTIL_MERGED, built)
    return Dispatch(job_type, built)


# A builder returns the payload, or (a str) why the job type cannot take this task.
Builder = Callable[[str, str, Facts], dict[str, Any] | str]


def _code(prompt: str, description: str, facts: Facts) -> dict[str, Any] | str:
    if not facts.repo_url:
        return "the plan has no repository (repo_url)"
    payload: dict[str, Any] = {"repo_url": facts.repo_url, "task": _cap(prompt, PROMPT_CHARS)}
    if facts.github_repo:
        payload["github_repo"] = facts.github_repo
    return payload


def _research(prompt: str, description: str, facts: Facts) -> dict[str, Any] | str:
    first = description.strip().splitlines()[0] if description.strip() else ""
    return {"topic": _cap(first, TOPIC_CHARS)} if first else "the task has no description"


def _check(prompt: str, description: str, facts: Facts) -> dict[str, Any] | str:
    found = _URL.search(description)
    if found is None:
        return "the task names no http(s) URL to check"
    return {"url": found.group(0).rstrip(".,;:")}


def _agent(prompt: str, role: str) -> dict[str, Any]:
    return {"prompt": _cap(prompt, PROMPT_CHARS), "role": role}


def _generic(prompt: str, description: str, facts: Facts) -> dict[str, Any] | str:
    """A job type the operator mapped a role to: it is given the prompt."""
    return {"prompt": _cap(prompt, PROMPT_CHARS)}


BUILDERS: dict[str, Builder] = {
    "code.run_task": _code,
    "research.generate_report": _research,
    "browser.check_page": _check,
}


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 40] + "\n[… cut to fit the job's limit]"
