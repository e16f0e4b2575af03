"""Job types that exist only in tests, to drive spawn, wait, sleep, replay and failures."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tasks.engine.errors import PermanentError, RetryableError, Suspend
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy

FAST_RETRY = RetryPolicy(base_seconds=0.05, max_seconds=0.1)


class FanOut(BaseModel):
    children: int = 2
    child_steps: int = 1
    child_step_seconds: float = 0.0
    # Another child type (e.g. test.doomed) and its payload; the canary fields are then unused.
    child_type: str = "system.canary"
    child_payload: dict[str, Any] | None = None


def fan_out(ctx, p: FanOut) -> dict:
    ctx.step("before", lambda: {"ok": True})
    payload = p.child_payload if p.child_payload is not None else {
        "steps": p.child_steps, "step_seconds": p.child_step_seconds}
    ids = [ctx.spawn(p.child_type, payload) for _ in range(p.children)]
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


class Doomed(BaseModel):
    message: str = "this can never work"


def doomed(ctx, p: Doomed) -> None:
    """Raises PermanentError inside a step: the job must fail on its first attempt."""

    def attempt() -> None:
        raise PermanentError(p.message)

    ctx.step("try", attempt)


class Flaky(BaseModel):
    fail_first_attempts: int = 1


def flaky(ctx, p: Flaky) -> dict:
    """Raises an exception Switchyard knows nothing about on its first attempts."""
    ctx.step("ok", lambda: "fine")
    if ctx.attempt <= p.fail_first_attempts:
        raise KeyError(f"attempt {ctx.attempt} trips over a bug")
    return {"attempt": ctx.attempt}


class Gated(BaseModel):
    gate: str  # a file path: the job fails (permanently) until the file exists


def gated(ctx, p: Gated) -> dict:
    ctx.step("before", lambda: "once")

    def pass_gate() -> str:
        if not Path(p.gate).exists():
            raise PermanentError(f"gate {p.gate} is closed")
        return "open"

    return {"gate": ctx.step("gate", pass_gate)}


class RateLimited(BaseModel):
    times: int = 2  # how many calls are refused before one succeeds


_calls: Counter[str] = Counter()  # per job; the test worker runs in this process


def rate_limited(ctx, p: RateLimited) -> dict:
    def call() -> int:
        _calls[str(ctx.job_id)] += 1
        if _calls[str(ctx.job_id)] <= p.times:
            raise RetryableError("429 Too Many Requests", delay=0.05, count_attempt=False)
        return _calls[str(ctx.job_id)]

    return {"calls": ctx.step("call", call)}


class Unserialisable(BaseModel):
    pass


def unserialisable(ctx, p: Unserialisable) -> set[int]:
    return {1, 2}


class CanceledMidStep(BaseModel):
    then: str  # "suspend" or "retry": what the job does right after the step


def canceled_mid_step(ctx, p: CanceledMidStep) -> None:
    """A cancel lands while the last step before a suspension or a retry is running.

    No step boundary follows, so only the runner can notice it.
    """
    from tasks.engine import control

    def work() -> None:
        control.cancel_tree(ctx.job_id)  # as if a user pressed cancel just now
        if p.then == "retry":
            raise RetryableError("upstream hiccup")

    ctx.step("work", work)
    # What ctx.sleep() does once its step is recorded (here: a long timer).
    raise Suspend("timer", wake_at=datetime.now(UTC) + timedelta(hours=1))


class OddOutput(BaseModel):
    # "nan" or "nul": an output json.dumps accepts but PostgreSQL's jsonb refuses;
    # "nul_error": an error message a text column refuses.
    kind: str


def odd_output(ctx, p: OddOutput) -> dict:
    def odd() -> dict:
        if p.kind == "nul_error":
            raise PermanentError("bad\x00byte")
        return {"value": float("nan") if p.kind == "nan" else "before\x00after"}

    ctx.step("odd", odd)
    ctx.step("next", lambda: 1)
    return {"ok": True}


class OneStep(BaseModel):
    pass


def one_step(ctx, p: OneStep) -> dict:
    return {"n": ctx.step("only", lambda: 1)}


class LongCommand(BaseModel):
    seconds: int  # how long its sandboxed command sleeps: a marker to find the process by


def long_command(ctx, p: LongCommand) -> dict:
    """A step inside a sandboxed command far longer than anyone would wait (a test suite, a
    build), as the coding agent runs them."""
    import tempfile
    from pathlib import Path

    from tasks.coding.fence import RunPolicy
    from tasks.coding.sandbox import run_command

    def run() -> dict:
        with tempfile.TemporaryDirectory() as root:
            Path(root).chmod(0o755)  # passable for the sandbox's user, as checkouts are
            done = run_command(Path(root), f"sleep {p.seconds}; echo slept",
                               RunPolicy(timeout_seconds=p.seconds + 60, memory_mb=512,
                                         output_chars=1000))
        return {"exit_code": done.exit_code, "output": done.output}

    return ctx.step("command", run)


register(JobType("test.long_command", LongCommand, long_command, max_attempts=1))
register(JobType("test.fan_out", FanOut, fan_out))
register(JobType("test.sleeper", Sleeper, sleeper))
register(JobType("test.shifty", Shifty, shifty, max_attempts=3, retry_policy=FAST_RETRY))
register(JobType("test.doomed", Doomed, doomed, max_attempts=5, retry_policy=FAST_RETRY))
register(JobType("test.flaky", Flaky, flaky, max_attempts=3, retry_policy=FAST_RETRY))
register(JobType("test.gated", Gated, gated, max_attempts=1))
register(JobType("test.rate_limited", RateLimited, rate_limited, max_attempts=1))
register(JobType("test.unserialisable", Unserialisable, unserialisable))
register(JobType("test.odd_output", OddOutput, odd_output, retry_policy=FAST_RETRY))


class Big(BaseModel):
    log_bytes: int = 0
    output_bytes: int = 0


def big(ctx, p: Big) -> dict:
    """Logs `log_bytes` of data, then returns `output_bytes` from a step."""
    if p.log_bytes:
        ctx.log("a big log line", blob="x" * p.log_bytes)
    ctx.step("big", lambda: {"blob": "y" * p.output_bytes})
    return {"ok": True}


register(JobType("test.big", Big, big, max_attempts=1))


class LosesDatabase(BaseModel):
    pass


_CUT: set[str] = set()  # jobs whose connection was cut already (the worker runs in-process)


def loses_database(ctx, p: LosesDatabase) -> dict:
    """On its first run its own statement finds the database down (as during a restart:
    psycopg's error names the server's address)."""
    from tasks.engine import pg

    def cut() -> int:
        if str(ctx.job_id) not in _CUT:
            _CUT.add(str(ctx.job_id))
            pg.connect("postgresql://postgres@127.0.0.1:1/switchyard")  # refused
        return ctx.attempt

    return {"attempt": ctx.step("cut", cut)}


register(JobType("test.loses_database", LosesDatabase, loses_database, max_attempts=1,
                 retry_policy=FAST_RETRY))
register(JobType("test.canceled_mid_step", CanceledMidStep, canceled_mid_step, max_attempts=3,
                 retry_policy=RetryPolicy(base_seconds=60.0, jitter=0.0)))


class Abandon(BaseModel):
    pass


def abandon(ctx, p: Abandon) -> None:
    """Spawns two slow children, then fails for good without waiting for them."""
    for _ in range(2):
        ctx.spawn("system.canary", {"steps": 50, "step_seconds": 0.2})
    raise PermanentError("giving up")


register(JobType("test.abandon", Abandon, abandon, max_attempts=1))


class ArtifactFile(BaseModel):
    kind: str = "report"
    name: str = "report.txt"
    content_type: str = "text/plain"
    text: str = "hello"


class ArtifactWriter(BaseModel):
    files: list[ArtifactFile] = [ArtifactFile()]
    fail_first_attempts: int = 0


def artifact_writer(ctx, p: ArtifactWriter) -> dict:
    """Writes its files as artifacts, then fails on its first attempts: the next attempt
    replays the writes, the last of them the last step recorded."""
    from tasks.services import artifacts

    ids = [artifacts.write(ctx, kind=f.kind, name=f.name, content_type=f.content_type,
                           data=f.text.encode()) for f in p.files]
    if ctx.attempt <= p.fail_first_attempts:
        raise RuntimeError(f"attempt {ctx.attempt} fails after writing its artifacts")
    return {"artifact_ids": ids}


register(JobType("test.artifact_writer", ArtifactWriter, artifact_writer, max_attempts=3,
                 retry_policy=FAST_RETRY))


class Refuse(BaseModel):
    prompt: str


def refuse(ctx, p: Refuse) -> None:
    """A plan task's job that fails for good (the planner's re-planning tests)."""
    raise PermanentError("refused on purpose: this role cannot do it")


register(JobType("test.refuse", Refuse, refuse, max_attempts=1))
register(JobType("test.one_step", OneStep, one_step, max_attempts=1))
