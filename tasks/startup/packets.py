"""`phase0.generate_packet` / `phase.generate_packet`: research → synthesis → a validated
packet, stored once, whose actions become approvals (nothing leaves without a human)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.services.approvals import create_approval
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest
from tasks.services.memory import write_memory
from tasks.startup import phases, proposals
from tasks.startup.packet import parse_packet
from tasks.startup.projects import project_context


class PacketPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phase: int = Field(0, ge=0, le=phases.LAST)
    revision_guidance: str | None = Field(None, max_length=5000)
    force_new_approval: bool = False


SYSTEM = ("You are the research and strategy agent of a startup operating system. "
          "Be concrete; every action you propose will be shown to the founder for approval.")


def _research(ctx: JobContext, context: dict[str, Any], p: PacketPayload) -> str:
    ask = (f"Project: {context['project_name']}\nGoal: {context['goal']}\n"
           f"{context['memory_prompt']}\nPhase {p.phase}. Research what matters most now."
           + (f"\nThe founder asked for this revision: {p.revision_guidance}"
              if p.revision_guidance else ""))
    req = LLMRequest(purpose="summary", system=SYSTEM,
                     context=context | {"phase": phases.name(p.phase)},
                     messages=[{"role": "user", "content": ask}])
    return call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                    step_seq=ctx.current_step).text


def _synthesize(ctx: JobContext, context: dict[str, Any], research: str, p: PacketPayload) -> dict:
    ask = ("Write the phase packet as JSON with title, summary, insights and actions "
           f"(each action: type, title, args). {proposals.prompt(context)}\n"
           f"Research notes:\n{research}")
    req = LLMRequest(purpose="packet", system=SYSTEM,
                     context=context | {"phase": phases.name(p.phase)},
                     messages=[{"role": "user", "content": ask}], max_tokens=2048)
    result = call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                      step_seq=ctx.current_step)
    packet = parse_packet(result.text).model_dump(mode="json")  # invalid → PermanentError
    return phases.with_advance(packet, p.phase)  # ours, not the model's: the way on


def _store_packet(project_id: uuid.UUID, job_id: uuid.UUID, phase: int, packet: dict) -> str:
    stored = pg.fetch_value(
        "WITH ins AS (INSERT INTO packets (id, project_id, job_id, phase, content) "
        "VALUES (%s, %s, %s, %s, %s::jsonb) ON CONFLICT (job_id) DO NOTHING RETURNING id) "
        "SELECT id FROM ins UNION ALL SELECT id FROM packets WHERE job_id = %s",
        (uuid.uuid4(), project_id, job_id, phase, json.dumps(packet), job_id))
    # The project is in the phase whose packet it has; the advance that asked for it is done.
    pg.execute("UPDATE projects SET phase = %s WHERE id = %s", (phases.name(phase), project_id))
    pg.execute("UPDATE approvals SET execution_status = 'completed', updated_at = now() "
               "WHERE project_id = %s AND action_type = %s AND status = 'approved' "
               "AND (action_args->>'to')::int = %s", (project_id, phases.ADVANCE, phase))
    return str(stored)


def _create_approvals(project_id: uuid.UUID, job_id: uuid.UUID, packet: dict,
                      force_new: bool) -> list[str]:
    return [str(create_approval(project_id, job_id, phases.approval_for(project_id, a),
                                force_new=force_new))
            for a in packet.get("actions", [])]


def handle(ctx: JobContext, p: PacketPayload) -> dict[str, Any]:
    context = ctx.step("load-context", project_context, ctx.project_id)
    research = ctx.step("research", _research, ctx, context, p)
    packet = ctx.step("synthesize", _synthesize, ctx, context, research, p)
    actions, aside = proposals.within(packet["actions"], context)
    if aside:  # pure, between checkpointed steps: a replay sets the same ones aside
        packet = packet | {"actions": actions, "set_aside": aside}
    packet_id = ctx.step("store-packet", _store_packet, ctx.project_id, ctx.job_id, p.phase,
                         packet)
    approvals = ctx.step("create-approvals", _create_approvals, ctx.project_id, ctx.job_id,
                         packet, p.force_new_approval)
    ctx.step("write-memory", write_memory, ctx.project_id, "decision",
             f"{phases.name(p.phase)}-packet",
             f"{packet['title']}: {packet['summary']}", job_id=ctx.job_id, step="write-memory")
    ctx.log(f"packet ready with {len(approvals)} action(s) awaiting approval",
            packet_id=packet_id, approvals=approvals)
    if aside:
        ctx.log(proposals.log_line(aside), set_aside=aside)
    return {"packet_id": packet_id, "approval_ids": approvals}


LLM_RETRY = RetryPolicy(base_seconds=2.0, factor=2.0, max_seconds=120.0)
PHASE0 = register(JobType("phase0.generate_packet", PacketPayload, handle, queue="agents",
                          max_attempts=5, retry_policy=LLM_RETRY))
PHASE = register(JobType("phase.generate_packet", PacketPayload, handle, queue="agents",
                         max_attempts=5, retry_policy=LLM_RETRY))
