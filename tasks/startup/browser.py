"""`browser.check_page`: a landing page checked in Chromium (tasks.startup.browser_check), its
screenshots stored as artifacts, the results recorded, a summary into memory.

The browser runs only when a step still needs what it sees: a retried job whose
screenshots and results were recorded replays them without opening the page again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine.context import JobContext
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.services import artifacts
from tasks.services.memory import write_memory
from tasks.startup import browser_check

Check = Literal["screenshot", "mobile_responsive", "waitlist_form", "meta_tags"]
SHOTS = ("screenshot", "mobile_responsive")  # the checks that leave a screenshot
ALL: tuple[Check, ...] = ("screenshot", "mobile_responsive", "waitlist_form", "meta_tags")
RECORDED = b"(recorded)"  # stands for bytes a replayed step does not read


class CheckPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=8, max_length=2000, pattern=r"^https?://[^\s/]+\S*$")
    checks: list[Check] = Field(default_factory=lambda: list(ALL), min_length=1, max_length=4)


def _once(run: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    seen: dict[str, Any] = {}

    def get() -> dict[str, Any]:
        if "result" not in seen:
            seen["result"] = run()
        return seen["result"]
    return get


def handle(ctx: JobContext, p: CheckPayload) -> dict[str, Any]:
    checks = list(dict.fromkeys(p.checks))
    look = _once(lambda: browser_check.check_page(p.url, checks))
    shots = {}
    for name in (c for c in checks if c in SHOTS):
        data = RECORDED if ctx.replaying else look()["_screenshots"][name]
        shots[name] = artifacts.write(ctx, kind="screenshot", name=f"{name}.png",
                                      content_type="image/png", data=data)
    result = ctx.step("record-checks", lambda: {
        k: v for k, v in look().items() if not k.startswith("_")})
    for name, artifact_id in shots.items():
        result["checks"][name]["artifact_id"] = artifact_id
    ctx.step("write-memory", write_memory, ctx.project_id, "fact", f"page check: {p.url}"[:200],
             browser_check.summary(result), job_id=ctx.job_id, step="write-memory")
    return result


JOB_TYPE = register(JobType("browser.check_page", CheckPayload, handle, queue="browser",
                            max_attempts=3, timeout_seconds=300,
                            retry_policy=RetryPolicy(base_seconds=5.0, max_seconds=60.0),
                            requires=("chromium",)))
