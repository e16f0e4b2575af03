"""Reads of what the agents produced: phase packets with their actions' approval state, and what
a job's model calls used, per step and in total. Queries apart from the pure joins below."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.api import responses
from tasks.engine import pg
from tasks.services.approvals import args_hash

APPROVAL_FIELDS = ("id", "source_job_id", "args_hash", "status", "version", "execution_status",
                   "execution_job_id", "decided_at")


def packets_of(project_id: uuid.UUID, limit: int = 50) -> list[dict[str, Any]]:
    """The project's packets, newest first, each action with the approval it became."""
    packets = pg.fetch_dicts(
        "SELECT p.id, p.phase, p.content, p.job_id, p.created_at, j.result AS job_result "
        "FROM packets p LEFT JOIN agent_jobs j ON j.id = p.job_id WHERE p.project_id = %s "
        "ORDER BY p.created_at DESC, p.id DESC LIMIT %s", (project_id, limit))
    if not packets:
        return []
    named = [i for p in packets for i in _approval_ids(p["job_result"]) or ()]
    approvals = pg.fetch_dicts(
        f"SELECT {', '.join(APPROVAL_FIELDS)} FROM approvals WHERE project_id = %s "
        "AND (source_job_id = ANY(%s::uuid[]) OR id = ANY(%s::uuid[]))",
        (project_id, [p["job_id"] for p in packets], named))
    return [packet_json(p, approvals) for p in packets]


def packet_json(packet: dict[str, Any], approvals: list[dict[str, Any]]) -> dict[str, Any]:
    content = packet["content"] if isinstance(packet["content"], dict) else {}
    actions = [a for a in content.get("actions") or [] if isinstance(a, dict)]
    return responses.Packet(
        id=packet["id"], phase=packet["phase"], title=content.get("title", ""),
        summary=content.get("summary", ""), insights=content.get("insights") or [],
        actions=[responses.PacketAction(type=a.get("type"), title=a.get("title"),
                                        args=a.get("args") or {}, approval=_approval(found))
                 for a, found in zip(actions, match_approvals(
                     packet["job_id"], actions, _approval_ids(packet["job_result"]),
                     approvals), strict=True)],
        job_id=packet["job_id"], created_at=packet["created_at"]).dump()


def match_approvals(job_id: Any, actions: list[dict[str, Any]], named: list[str] | None,
                    approvals: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The approval each action became. The job's result names them in order (an identical
    action still pending elsewhere is reused, so its approval has another source job); until
    the job has a result, an approval of this job with the action's exact arguments."""
    by_id = {str(a["id"]): a for a in approvals}
    if named is not None and len(named) == len(actions):
        return [by_id.get(i) for i in named]
    own = {a["args_hash"]: a for a in approvals if str(a["source_job_id"]) == str(job_id)}
    return [own.get(args_hash(str(a.get("type")), a.get("args") or {})) for a in actions]


def _approval_ids(result: Any) -> list[str] | None:
    ids = result.get("approval_ids") if isinstance(result, dict) else None
    return [str(i) for i in ids] if isinstance(ids, list) else None


def _approval(a: dict[str, Any] | None) -> responses.ActionApproval | None:
    if a is None:
        return None
    return responses.ActionApproval(
        id=a["id"], status=a["status"], version=a["version"],
        execution_status=a["execution_status"], execution_job_id=a["execution_job_id"],
        decided_at=a["decided_at"])


@dataclass(frozen=True)
class Usage:
    seq: int | None
    name: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal
    models: tuple[str, ...] = ()  # "provider/model" of each model the step called

    def counts(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": float(self.cost_usd)}


def usage_of(job_id: uuid.UUID) -> dict[str, Any]:
    """A job's model calls by step (in step order; calls outside a step last) and in total."""
    rows = [Usage(**r) for r in pg.fetch_dicts(
        "SELECT u.step_seq AS seq, s.name, count(*)::int AS calls, "
        "sum(u.input_tokens)::bigint AS input_tokens, "
        "sum(u.output_tokens)::bigint AS output_tokens, sum(u.cost_usd) AS cost_usd, "
        "array_agg(DISTINCT u.provider || '/' || u.model ORDER BY u.provider || '/' || "
        "u.model) AS models "
        "FROM llm_usage u LEFT JOIN job_steps s ON s.job_id = u.job_id AND s.seq = u.step_seq "
        "WHERE u.job_id = %s GROUP BY u.step_seq, s.name ORDER BY u.step_seq NULLS LAST",
        (job_id,))]
    return usage_json(rows)


def usage_json(rows: list[Usage]) -> dict[str, Any]:
    total = Usage(None, None, sum(r.calls for r in rows), sum(r.input_tokens for r in rows),
                  sum(r.output_tokens for r in rows), sum((r.cost_usd for r in rows), Decimal(0)))
    return responses.LlmUsage(
        total=responses.Usage(**total.counts()),
        steps=[responses.StepUsage(seq=r.seq, name=r.name, models=list(r.models), **r.counts())
               for r in rows]).dump()
