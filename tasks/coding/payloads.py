"""What a client hands the coding agent: the payloads of `code.run_task` and `code.generate_mvp`."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tasks.coding.gitsource import url_problem

GITHUB_REPO = r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$"
# A branch name git accepts and a shell or an option parser cannot misread.
BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
# The same rule (and _branch's) as one pattern, so the API's schema says what is accepted.
BRANCH_PATTERN = (r"^(?!.*\.\.)(?!.*//)(?!.*\.lock$)[A-Za-z0-9]"
                  r"(?:[A-Za-z0-9._/-]{0,198}[A-Za-z0-9_-])?$")


def _branch(value: str | None) -> str | None:
    if value is None:
        return None
    if not BRANCH.fullmatch(value) or ".." in value or value.endswith((".lock", "/", ".")) \
            or "//" in value or "@{" in value:
        raise ValueError("not a branch name git accepts (letters, digits, . _ / -)")
    return value


class RunTaskPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repo_url: str = Field(min_length=1, max_length=2000)
    task: str = Field(min_length=1, max_length=20_000)
    # The branch to start from and to open the pull request against (default: the
    # repository's default branch); the work itself goes on switchyard/<job>-<slug>.
    branch: str | None = Field(None, json_schema_extra={"pattern": BRANCH_PATTERN})
    github_repo: str | None = Field(None, pattern=GITHUB_REPO)
    max_iterations: int = Field(5, ge=1, le=10)
    # A change whose verification failed goes out as a draft pull request that says so;
    # false: no pull request at all (the branch is still pushed).
    open_draft_on_failure: bool = True

    _check_branch = field_validator("branch")(classmethod(lambda cls, v: _branch(v)))
    _check_task = field_validator("task")(classmethod(lambda cls, v: _not_blank(v)))
    _check_repo_url = field_validator("repo_url")(classmethod(lambda cls, v: _cloneable(v)))


def _cloneable(value: str | None) -> str | None:
    # The syntax alone (no DNS, no file system): every route that enqueues a coding job
    # refuses a URL git can never clone, rather than the job failing at its clone step.
    if value is not None and (problem := url_problem(value)):
        raise ValueError(problem)
    return value


def _not_blank(value: str) -> str:
    # A blank task planned nothing, changed nothing and came back "verified".
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class GenerateMvpPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1, max_length=5000)
    repo_url: str | None = Field(None, min_length=1, max_length=2000)
    github_repo: str | None = Field(None, pattern=GITHUB_REPO)

    _check_repo_url = field_validator("repo_url")(classmethod(lambda cls, v: _cloneable(v)))
