"""Job types that exist only in tests, to drive spawn, wait, sleep and replay."""

from __future__ import annotations

from pydantic import BaseModel

from tasks.registry import JobType, register
from tasks.retry import RetryPolicy


class FanOut(BaseModel):
    children: int = 2
    child_steps: int = 1
    child_step_seconds: float = 0.0


def fan_out(ctx, p: FanOut) -> dict:
    ctx.step("before", lambda: {"ok": True})
    ids = [ctx.spawn("system.canary", {"steps": p.child_steps,
                                       "step_seconds": p.child_step_seconds})
           for _ in range(p.children)]
    outcomes = ctx.wait(ids)
    ctx.step("after", lambda: {"children": len(outcomes)})
    return {"children": [o.status for o in outcomes]}


class Sleeper(BaseModel):
    seconds: float = 1.0


def sleeper(ctx, p: Sleeper) -> dict:
    ctx.step("before", lambda: 1)
    ctx.sleep(p.seconds)
    ctx.step("after", lambda: 2)
    return {"slept": p.seconds}


class Shifty(BaseModel):
    pass


def shifty(ctx, p: Shifty) -> None:
    """Names its first step after the attempt: a non-deterministic handler."""
    ctx.step(f"first-{ctx.attempt}", lambda: 1)
    raise RuntimeError("fail once so the next attempt replays")


register(JobType("test.fan_out", FanOut, fan_out))
register(JobType("test.sleeper", Sleeper, sleeper))
register(JobType("test.shifty", Shifty, shifty, max_attempts=3,
                 retry_policy=RetryPolicy(base_seconds=0.05, max_seconds=0.1)))
