"""`agent.task`: a plan task no other job type takes, answered by the model in its role."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine.context import JobContext
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest

SYSTEM = ("You are the {role} of a team of agents working towards a goal. Do the task you "
          "are given with what you know and what the earlier tasks produced, and answer with "
          "its result: concrete, complete, no preamble.")


class AgentTaskPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=20_000)
    role: str = Field("assistant", min_length=1, max_length=40)


def _answer(ctx: JobContext, p: AgentTaskPayload) -> dict[str, Any]:
    req = LLMRequest(purpose="agent.task", system=SYSTEM.format(role=p.role), max_tokens=2000,
                     messages=[{"role": "user", "content": p.prompt}],
                     context={"role": p.role, "user_message": p.prompt})
    result = call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                      step_seq=ctx.current_step)
    return {"text": result.text}


def handle(ctx: JobContext, p: AgentTaskPayload) -> dict[str, Any]:
    return ctx.step("answer", _answer, ctx, p)


AGENT_TASK = register(JobType("agent.task", AgentTaskPayload, handle, queue="agents",
                              max_attempts=3, timeout_seconds=600,
                              retry_policy=RetryPolicy(base_seconds=2.0, max_seconds=60.0)))
