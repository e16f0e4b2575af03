"""`code.run_task` and `code.generate_mvp`: the coding agent on the engine (being built)."""

from __future__ import annotations

from typing import Any

from tasks.coding.payloads import GenerateMvpPayload, RunTaskPayload
from tasks.context import JobContext
from tasks.errors import PermanentError
from tasks.registry import JobType, register
from tasks.retry import RetryPolicy


def run_task(ctx: JobContext, p: RunTaskPayload) -> dict[str, Any]:
    raise PermanentError("code.run_task is not built yet")


def generate_mvp(ctx: JobContext, p: GenerateMvpPayload) -> dict[str, Any]:
    raise PermanentError("code.generate_mvp is not built yet")


RUN_TASK = register(JobType("code.run_task", RunTaskPayload, run_task, queue="agents",
                            max_attempts=5, timeout_seconds=3600,
                            retry_policy=RetryPolicy(base_seconds=2.0, max_seconds=120.0)))
GENERATE_MVP = register(JobType("code.generate_mvp", GenerateMvpPayload, generate_mvp,
                                queue="agents", max_attempts=5, timeout_seconds=3600,
                                retry_policy=RetryPolicy(base_seconds=2.0, max_seconds=120.0)))
