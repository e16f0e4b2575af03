"""The coding agent's job types: a task on a repository, an MVP from a description, and a
task carried until its pull request is merged."""

from __future__ import annotations

from typing import Any

from tasks.coding import checkouts, mvp, pipeline, sandbox, until_merged
from tasks.coding.payloads import GenerateMvpPayload, RunTaskPayload
from tasks.coding.tokens import admit_pull_request
from tasks.engine import system_parts
from tasks.engine.context import JobContext
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy


def generate_mvp(ctx: JobContext, p: GenerateMvpPayload) -> dict[str, Any]:
    return mvp.generate(ctx, p, resumed=ctx.replaying)


def _sandbox() -> system_parts.Finding:
    why = sandbox.problem()  # the fence's own probe: one test of what it needs
    return system_parts.Finding(why is None, why or sandbox.fence_in_use())


SANDBOX = system_parts.Part("sandbox", "bubblewrap sandbox", f"{system_parts.APT} bubblewrap",
                            _sandbox)
system_parts.add(SANDBOX)
CODING_PARTS = ("git", "ripgrep", SANDBOX.name)
POLICY = RetryPolicy(base_seconds=2.0, max_seconds=120.0)
def _admit_task(project_id: str, payload: dict[str, Any]) -> None:
    admit_pull_request(project_id, payload.get("github_repo"))


def _admit_mvp(project_id: str, payload: dict[str, Any]) -> None:
    # An MVP without a repository is generated from scratch and opens no pull request.
    admit_pull_request(project_id, payload.get("github_repo") if payload.get("repo_url") else None)


RUN_TASK = register(JobType("code.run_task", RunTaskPayload, pipeline.run_task, queue="agents",
                            max_attempts=5, timeout_seconds=3600, retry_policy=POLICY,
                            on_end=checkouts.release, requires=CODING_PARTS,
                            admit=_admit_task))
GENERATE_MVP = register(JobType("code.generate_mvp", GenerateMvpPayload, generate_mvp,
                                queue="agents", max_attempts=5, timeout_seconds=3600,
                                retry_policy=POLICY, on_end=checkouts.release,
                                requires=CODING_PARTS, admit=_admit_mvp))
UNTIL_MERGED = register(JobType("code.run_task_until_merged", RunTaskPayload,
                                until_merged.handle, queue="agents", max_attempts=5,
                                public=False))
