"""`system.canary`: a health probe users can run, and the workload of tests and benchmarks."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tasks.engine.context import JobContext
from tasks.engine.errors import RetryableError
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy

MAX_BUSY_SECONDS = 300.0


class CanaryPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: int = Field(3, ge=1, le=1000)
    step_seconds: float = Field(0.0, ge=0, le=60)
    fail_first_attempts: int = Field(0, ge=0, le=100)
    # After the first step: a durable timer (0 = none), then that many 1-step child
    # canaries waited for (0 = none). Waiting costs no attempt: these show it.
    sleep_seconds: float = Field(0.0, ge=0, le=86400)
    children: int = Field(0, ge=0, le=100)

    @model_validator(mode="after")
    def _bounded(self) -> CanaryPayload:
        # A probe anyone may run must not hold a worker thread for long: its steps sleep at
        # most this much in all (a durable `sleep_seconds` holds no thread).
        if self.steps * self.step_seconds > MAX_BUSY_SECONDS:
            raise ValueError(f"steps * step_seconds is at most {MAX_BUSY_SECONDS:g} seconds")
        return self


def _step(n: int, seconds: float, fail: bool) -> dict[str, int]:
    if seconds:
        time.sleep(seconds)
    if fail:
        raise RetryableError(f"canary step-{n} failing on purpose (fail_first_attempts)")
    return {"n": n}


def handle(ctx: JobContext, payload: CanaryPayload) -> dict[str, int]:
    failing = ctx.attempt <= payload.fail_first_attempts
    for n in range(1, payload.steps + 1):
        # The last step is the one that fails, so a retry shows replay at work:
        # every earlier step comes back from the database without running.
        ctx.step(f"step-{n}", _step, n, payload.step_seconds, failing and n == payload.steps)
        if n == 1:
            _wait_after_first(ctx, payload)
    return {"steps": payload.steps, "attempt": ctx.attempt}


def _wait_after_first(ctx: JobContext, payload: CanaryPayload) -> None:
    if payload.sleep_seconds:
        ctx.sleep(payload.sleep_seconds)
    if payload.children:
        kids = [ctx.spawn("system.canary", {"steps": 1, "step_seconds": payload.step_seconds})
                for _ in range(payload.children)]
        ctx.wait(kids)


JOB_TYPE = register(
    JobType(
        name="system.canary",
        payload_model=CanaryPayload,
        handle=handle,
        queue="default",
        max_attempts=5,
        timeout_seconds=int(MAX_BUSY_SECONDS) * 2,
        retry_policy=RetryPolicy(base_seconds=0.2, factor=2.0, max_seconds=5.0),
    )
)
