"""`function.run`: a stored function run in the sandbox with its tools, its calls recorded
and replayed (tasks.functions.run); `code.generate_function`: the model writes a function,
the sandbox checks and test-runs it (bounded retries), and it is saved as a new version."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.functions import generate, sandbox, store
from tasks.functions.host import MAX_DEPTH, Running
from tasks.functions.run import run_function
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest

Name = Annotated[str, Field(pattern=store.NAME_PATTERN, description=store.NAME_RULE)]


class RunPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    version: Annotated[int, Field(ge=1)] | None = None  # None: the newest when the run starts
    input: Any = None
    # The functions whose tasks.run started this one, outermost first: its nesting depth.
    callers: list[Name] = Field(default_factory=list, max_length=MAX_DEPTH)


def _load(project_id: Any, name: str, version: int | None) -> dict[str, Any]:
    found = store.get(project_id, name, version)
    if found is None:
        which = f"version {version} of " if version is not None else ""
        raise PermanentError(f"no {which}function named {name!r} in this project")
    return {"name": found.name, "version": found.version}


def run(ctx: JobContext, p: RunPayload) -> dict[str, Any]:
    # The version is recorded, so a version saved while the run waits changes nothing.
    pinned = ctx.step("load", _load, ctx.project_id, p.name, p.version)
    fn = store.get(ctx.project_id, p.name, pinned["version"])
    if fn is None:  # versions are never updated; only the project's deletion removes one
        raise PermanentError(f"function {p.name!r} v{pinned['version']} is gone")
    running = Running(fn.name, fn.version, tuple(p.callers))
    return {"output": run_function(ctx, running, fn.code, p.input)}


class GeneratePayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    description: Annotated[str, Field(min_length=1, max_length=store.DESCRIPTION_MAX,
                                      pattern=r"^[^\x00]*$")]


def _ask(ctx: JobContext, p: GeneratePayload, messages: list[dict[str, Any]]) -> str:
    req = LLMRequest(purpose="function_code", system=generate.TOOLS_GUIDE, messages=messages,
                     max_tokens=4096, context={"function_name": p.name,
                                               "description": p.description})
    return call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                    step_seq=ctx.current_step).text


def _test(draft: dict[str, Any]) -> str | None:
    """Why the draft fails its syntax check or its dry test run, or None when it passes."""
    code = draft["code"]
    if len(code) > store.CODE_MAX:
        return f"the code is {len(code)} characters, over the cap of {store.CODE_MAX}"
    problem = sandbox.check_syntax(code)
    if problem is not None:
        return problem.headline
    outcome = sandbox.run(code, draft["sample_input"], generate.dry_call,
                          sandbox.Limits(wall_seconds=5.0))
    if isinstance(outcome, sandbox.Failed):
        line = f" at line {outcome.line}" if outcome.line is not None else ""
        return f"the test run on the sample input failed ({outcome.kind}){line}: " \
               f"{outcome.message}"
    return None


def _save(ctx: JobContext, p: GeneratePayload, code: str) -> int:
    return store.save(ctx.project_id, p.name, code, description=p.description,
                      created_by_job=ctx.job_id).version


def generate_function(ctx: JobContext, p: GeneratePayload) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": generate.brief(p.name, p.description)}]
    problem = None
    for attempt in range(1, generate.TRIES + 1):
        text = ctx.step(f"write:{attempt}", _ask, ctx, p, messages)
        draft = generate.read_answer(text)
        drafted = {"code": draft.code, "sample_input": draft.sample_input}
        problem = ctx.step(f"test:{attempt}", _test, drafted)
        if problem is None:
            saved = ctx.step("save", _save, ctx, p, draft.code)
            return {"name": p.name, "version": saved, "attempts": attempt,
                    "sample_input": draft.sample_input}
        ctx.log(f"draft {attempt} refused: {problem}")
        messages += [{"role": "assistant", "content": text},
                     {"role": "user", "content": generate.retry_prompt(problem)}]
    raise PermanentError(f"the model wrote no working function in {generate.TRIES} tries; "
                         f"the last problem: {problem}")


RUN = register(JobType("function.run", RunPayload, run, queue="default", max_attempts=3))
GENERATE = register(JobType("code.generate_function", GeneratePayload, generate_function,
                            queue="agents", max_attempts=3,
                            retry_policy=RetryPolicy(base_seconds=1.0, max_seconds=60.0)))
