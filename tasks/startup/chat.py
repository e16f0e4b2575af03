"""`chat.reply`: a streamed assistant reply. Deltas leave as `delta` events (~250 ms or ~500
chars); the final message is stored exactly once (unique on the message it answers)."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict

from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.engine.deltas import DeltaBuffer
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.engine.errors import PermanentError
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest
from tasks.services.memory import write_memory
from tasks.startup.projects import project_context

HISTORY = 20


class ChatPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message_id: uuid.UUID


def post(project_id: uuid.UUID, message: str) -> tuple[uuid.UUID, uuid.UUID]:
    """Store a founder's message and enqueue its reply; (message id, reply job id)."""
    message_id = uuid.uuid4()
    # The message and its reply job commit together; the wake-up is published after.
    with pg.transaction():
        pg.execute("INSERT INTO chat_messages (id, project_id, role, content) "
                   "VALUES (%s, %s, 'user', %s)", (message_id, project_id, message))
        job = enqueue(EnqueueRequest(project_id, "chat.reply", {"message_id": str(message_id)},
                                     idempotency_key=f"chat:{project_id}:{message_id}"),
                      publish=False)
        pg.execute("UPDATE chat_messages SET job_id = %s WHERE id = %s",
                   (job.job_id, message_id))
    job.publish()
    return message_id, job.job_id


def _load(project_id: uuid.UUID, message_id: uuid.UUID) -> dict[str, Any]:
    row = pg.fetch_one_dict("SELECT content, created_at FROM chat_messages WHERE id = %s "
                            "AND project_id = %s AND role = 'user'", (message_id, project_id))
    if row is None:
        raise PermanentError(f"chat message {message_id} not found in this project")
    history = pg.fetch_dicts("SELECT role, content FROM chat_messages WHERE project_id = %s "
                             "AND created_at < %s ORDER BY created_at DESC LIMIT %s",
                             (project_id, row["created_at"], HISTORY))
    messages = [{"role": h["role"], "content": h["content"]} for h in reversed(history)]
    messages.append({"role": "user", "content": row["content"]})
    return {"context": project_context(project_id) | {"user_message": row["content"]},
            "messages": messages}


def _reply(ctx: JobContext, loaded: dict[str, Any]) -> str:
    context = loaded["context"]
    system = ("You are the founder's co-pilot in a startup operating system for the project "
              f"{context['project_name']!r} (goal: {context['goal']}).\n{context['memory_prompt']}")
    buffer = DeltaBuffer(lambda text: ctx.emit("delta", text, {"text": text}))
    req = LLMRequest(purpose="chat", system=system, messages=loaded["messages"], context=context)
    result = call_llm(get_client(), req, project_id=ctx.project_id, job_id=ctx.job_id,
                      on_text=buffer.add, step_seq=ctx.current_step)
    buffer.flush()
    return result.text


def _store(project_id: uuid.UUID, job_id: uuid.UUID, message_id: uuid.UUID, text: str) -> str:
    stored = pg.fetch_value(
        "WITH ins AS (INSERT INTO chat_messages (id, project_id, role, content, reply_to, job_id) "
        "VALUES (%s, %s, 'assistant', %s, %s, %s) ON CONFLICT (reply_to) DO NOTHING "
        "RETURNING id) SELECT id FROM ins UNION ALL "
        "SELECT id FROM chat_messages WHERE reply_to = %s",
        (uuid.uuid4(), project_id, text, message_id, job_id, message_id))
    return str(stored)


def handle(ctx: JobContext, p: ChatPayload) -> dict[str, Any]:
    loaded = ctx.step("load-conversation", _load, ctx.project_id, p.message_id)
    text = ctx.step("reply", _reply, ctx, loaded)
    reply_id = ctx.step("store-reply", _store, ctx.project_id, ctx.job_id, p.message_id, text)
    ctx.step("write-memory", write_memory, ctx.project_id, "context", "last-conversation",
             loaded["context"]["user_message"][:500], job_id=ctx.job_id, step="write-memory")
    # Its deltas go a minute later (tasks.engine.retention.fold_deltas): a stream a moment behind
    # still shows the reply being written.
    return {"message_id": reply_id, "reply_to": str(p.message_id), "chars": len(text)}


JOB_TYPE = register(JobType("chat.reply", ChatPayload, handle, queue="agents", max_attempts=5,
                            retry_policy=RetryPolicy(base_seconds=1.0, max_seconds=60.0),
                            public=False))
