"""Asking the model for a plan or a revision: each ask a recorded step, an invalid answer
asked again with its problems (up to ASKS times), then the job fails naming them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.planner import prompts
from tasks.planner.schema import parse_answer
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest

ASKS = 3
MAX_TOKENS = 4000


class InvalidPlan(PermanentError):
    """The model gave no valid plan in ASKS asks; the message names the last problems."""


def _ask(ctx: JobContext, purpose: str, system: str, messages: list[dict[str, Any]],
         context: dict[str, Any]) -> dict[str, Any]:
    req = LLMRequest(purpose=purpose, system=system, messages=messages, max_tokens=MAX_TOKENS,
                     context=context)
    result = call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                      step_seq=ctx.current_step)
    return {"text": result.text}


def ask_until_valid(ctx: JobContext, name: str, *, purpose: str, system: str, first: str,
                    context: dict[str, Any], kept: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The tasks of the first valid answer, as dicts; InvalidPlan after ASKS invalid ones.
    `name` prefixes the steps (e.g. "plan", "revise:1"); `kept` as in schema.parse_answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    errors: list[str] = []
    for attempt in range(1, ASKS + 1):
        answer = ctx.step(f"llm:{name}:{attempt}", _ask, ctx, purpose, system, messages,
                          {**context, "attempt": attempt})
        tasks, errors = parse_answer(answer["text"], kept=kept)
        if not errors:
            ctx.emit("plan", f"{name}: {len(tasks)} tasks (ask {attempt})",
                     {"tasks": [t.as_dict() for t in tasks], "attempt": attempt})
            return [t.as_dict() for t in tasks]
        ctx.emit("log", f"{name}: ask {attempt} gave an invalid plan ({len(errors)} problems)",
                 {"level": "warning", "errors": errors[:20]})
        messages += [{"role": "assistant", "content": answer["text"] or "(empty)"},
                     {"role": "user", "content": prompts.retry_prompt(errors)}]
    shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
    raise InvalidPlan(f"the model gave no valid plan in {ASKS} asks; the last one: {shown}")
