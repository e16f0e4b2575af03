"""The tools a function calls, performed for real: each is called inside a recorded step.

A problem the function's author can fix (a bad argument, web search turned off) is a
ToolError, which the function sees as a catchable JavaScript Error; anything else (the
database gone, the model's rate limit, the daily budget spent) is the engine's to handle.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

from tasks.engine.context import PREVIEW_CHARS, JobContext
from tasks.engine.storable import to_json
from tasks.functions import data
from tasks.functions.record import Secrets
from tasks.services import artifacts, keystore
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest
from tasks.services.memory import CATEGORIES, load_memory, write_memory
from tasks.services.quotas import QuotaExceeded
from tasks.services.research import websearch
from tasks.settings import get_settings

# The tool names are tasks.functions.sandbox.TOOLS (what the prelude installs). Of them, these
# are performed after the pass stops, each as its own step; NESTED is a child job; the rest
# are answered at once, inside their step.
REAL_TIME = ("llm", "openai.chat", "websearch")
NESTED = "tasks.run"
PROMPT_MAX = 100_000  # characters
MAX_TOKENS = 4096
LOG_MAX = 4000  # characters of a log message kept
MEMORY_MAX = 16 * 1024
QUERY_MAX = 500


class ToolError(Exception):
    """The function asked for something it cannot have; it sees this as a JS Error."""


@dataclass(frozen=True)
class Caller:
    """Who is calling: the job running the function, and its step in progress."""
    ctx: JobContext
    secrets: Secrets
    seed: str  # unique to this call of this job: makes its writes repeatable


def perform(tool: str, args: Any, who: Caller) -> Any:
    """Run one tool call and return its JSON answer (ToolError: the function's problem)."""
    if not isinstance(args, dict):
        raise ToolError(f"{tool}: arguments must be an object")
    handler = _HANDLERS.get(tool)
    if handler is None:
        raise ToolError(f"unknown tool {tool!r}")
    return handler(args, who)


def _text(args: dict[str, Any], name: str, tool: str, *, limit: int,
          required: bool = True) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise ToolError(f"{tool}: {name} must be a non-empty string")
    if len(value) > limit:
        raise ToolError(f"{tool}: {name} is {len(value)} characters, over the cap of {limit}")
    if "\x00" in value:
        raise ToolError(f"{tool}: {name} cannot hold the NUL character")
    return value


def _db(args: dict[str, Any], who: Caller) -> Any:
    # A secret the function read is not stored as itself: a later run that never read it
    # would otherwise get it back, and record it unscrubbed.
    if args.get("op") in ("insert", "update", "upsert") and "values" in args:
        args = {**args, "values": who.secrets.scrub(args["values"])}
    return data.run(who.ctx.project_id, args, seed=who.seed)


def _memory_get(args: dict[str, Any], who: Caller) -> Any:
    category = _text(args, "category", "memory.get", limit=50, required=False)
    key = _text(args, "key", "memory.get", limit=500, required=False)
    if category is not None and category not in CATEGORIES:
        raise ToolError(f"memory.get: category must be one of {', '.join(CATEGORIES)}")
    entries = load_memory(who.ctx.project_id, (category,) if category else CATEGORIES,
                          limit=200)
    if key is not None:
        found = [e.content for e in entries if e.key == key]
        return found[0] if found else None
    return [{"category": e.category, "key": e.key, "content": e.content} for e in entries]


def _memory_set(args: dict[str, Any], who: Caller) -> Any:
    category = _text(args, "category", "memory.set", limit=50)
    if category not in CATEGORIES:
        raise ToolError(f"memory.set: category must be one of {', '.join(CATEGORIES)}")
    key = _text(args, "key", "memory.set", limit=500)
    content = _text(args, "content", "memory.set", limit=MEMORY_MAX)
    assert key is not None and content is not None
    # A secret the function read is not remembered as itself.
    try:
        write_memory(who.ctx.project_id, category, who.secrets.text(key),
                     who.secrets.text(content), job_id=who.ctx.job_id, step=who.seed)
    except QuotaExceeded as over:
        raise ToolError(f"memory.set: {over}") from None
    return None


def read_secret(project_id: uuid.UUID, name: Any) -> str | None:
    if not isinstance(name, str) or not keystore.NAME.fullmatch(name):
        raise ToolError(f"keystore.get: a secret's name is {keystore.NAME_RULE}")
    return keystore.read(str(project_id), [name]).get(name)


LOG_LEVELS = ("debug", "info", "warn", "error")


def _log(args: dict[str, Any], who: Caller) -> Any:
    message = args.get("message")
    text = message if isinstance(message, str) else str(message)
    text = who.secrets.text(text.replace("\x00", "\\0"))[:LOG_MAX]
    payload = who.secrets.scrub(args.get("data"))
    level = args.get("level")
    extra = {"level": level} if level in LOG_LEVELS else {}  # console.* says which
    encoded = to_json(payload, "log data")
    if len(encoded.encode()) <= get_settings().event_data_max_bytes:
        who.ctx.emit("log", text, {"source": "function", "data": payload, **extra})
        return None
    # The claim check: the whole data as an artifact of the job, the event its reference
    # and a preview (a feed every stream of the project reads holds no megabytes).
    try:
        call = who.seed.rsplit(":", 1)[-1]
        stored = artifacts.store_file(who.ctx, "function-log", "log", f"log-{call}.json",
                                      "application/json", encoded.encode())
    except QuotaExceeded as over:
        raise ToolError(f"log: {over}") from None
    who.ctx.emit("log", text, {"source": "function", "artifact_id": stored["id"],
                               "bytes": stored["size"], "preview": encoded[:PREVIEW_CHARS],
                               **extra})
    return None


def _now(args: dict[str, Any], who: Caller) -> Any:
    return int(who.ctx.clock.now().timestamp() * 1000)


def _random(args: dict[str, Any], who: Caller) -> Any:
    return random.random()


def _llm(args: dict[str, Any], who: Caller) -> Any:
    prompt = _text(args, "prompt", "llm", limit=PROMPT_MAX)
    system = _text(args, "system", "llm", limit=PROMPT_MAX, required=False) or \
        "You are a helpful assistant called from a function. Answer concisely."
    max_tokens = args.get("max_tokens", 1024)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) \
            or not 1 <= max_tokens <= MAX_TOKENS:
        raise ToolError(f"llm: max_tokens must be a whole number from 1 to {MAX_TOKENS}")
    req = LLMRequest(purpose="function_llm", system=system, max_tokens=max_tokens,
                     messages=[{"role": "user", "content": prompt}],
                     context={"user_message": prompt})
    result = call_llm(get_client(), req, project_id=who.ctx.project_id,
                      job_id=who.ctx.job_id, step_seq=who.ctx.current_step)
    return result.text


FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                  "tool_use": "tool_calls"}
MAX_MESSAGES = 200


def _openai_chat(args: dict[str, Any], who: Caller) -> Any:
    """`tools.openai.chat.completions.create({model, messages, max_tokens?, temperature?})`
    through the configured provider, answered in OpenAI's chat.completion shape. The model
    name is advisory: the operator's provider and model answer."""
    messages = args.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        raise ToolError(f"openai.chat.completions.create: messages must be a list of 1 to "
                        f"{MAX_MESSAGES} {{role, content}} objects")
    system: list[str] = []
    turns: list[dict[str, str]] = []
    total = 0
    for n, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant") or not isinstance(
                content, str):
            raise ToolError(f"openai.chat.completions.create: messages[{n}] must be "
                            "{role: system|user|assistant, content: string}")
        total += len(content)
        if total > PROMPT_MAX:
            raise ToolError(f"openai.chat.completions.create: the messages are over "
                            f"{PROMPT_MAX} characters")
        if role in ("system", "developer"):
            system.append(content)
        else:
            turns.append({"role": role, "content": content})
    if not turns or turns[0]["role"] != "user":
        raise ToolError("openai.chat.completions.create: the first message after the system "
                        "ones must be the user's")
    max_tokens = args.get("max_tokens", args.get("max_completion_tokens", 1024))
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) \
            or not 1 <= max_tokens <= MAX_TOKENS:
        raise ToolError(f"openai.chat.completions.create: max_tokens must be a whole number "
                        f"from 1 to {MAX_TOKENS}")
    last_user = next(t["content"] for t in reversed(turns) if t["role"] == "user")
    req = LLMRequest(purpose="function_llm", max_tokens=max_tokens, messages=turns,
                     system="\n\n".join(system) or "You are a helpful assistant.",
                     context={"user_message": last_user})
    result = call_llm(get_client(), req, project_id=who.ctx.project_id,
                      job_id=who.ctx.job_id, step_seq=who.ctx.current_step)
    usage = result.usage
    return {"id": "chatcmpl-" + who.seed.replace(":", "-"), "object": "chat.completion",
            "created": int(who.ctx.clock.now().timestamp()),
            "model": result.model or str(args.get("model") or ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result.text},
                         "finish_reason": FINISH_REASONS.get(result.stop_reason or "", "stop")}],
            "usage": {"prompt_tokens": usage.input_tokens,
                      "completion_tokens": usage.output_tokens,
                      "total_tokens": usage.input_tokens + usage.output_tokens}}


def _websearch(args: dict[str, Any], who: Caller) -> Any:
    query = _text(args, "query", "websearch", limit=QUERY_MAX)
    assert query is not None
    found, note = websearch(query)
    if note:
        raise ToolError(f"websearch: {note}")
    return [{"title": f.title, "url": f.url, "snippet": f.snippet} for f in found]


_HANDLERS = {"db": _db, "memory.get": _memory_get, "memory.set": _memory_set, "log": _log,
             "now": _now, "random": _random, "llm": _llm, "openai.chat": _openai_chat,
             "websearch": _websearch}
