"""The offline provider: deterministic, plausible answers built from the project's own data.

It lets the embedded demo and the tests run the whole agent loop with no network
and no key: the same request always gives the same answer, shaped by its `purpose`
and its `context`. Each system registers the answers to its own purposes (the startup
OS's packets and chat, the planner's plans, the functions' code, the coding agent's
recorded tool sessions); a purpose nobody answers gets an echo. It costs nothing; its
token counts are estimates (~4 characters a token).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from typing import Any

from tasks.services.llm.types import LLMRequest, LLMResult, ToolCall, Usage
from tasks.settings import get_settings

PROVIDER = "scripted"
MODEL = "scripted-1"
STREAM_CHUNKS = 8

# What answers each purpose: registered by the systems (tasks.catalog imports their answer
# modules), so this provider knows no system. A key ending in ".*" answers every purpose
# under that prefix (the coding agent's code.explore, code.plan, ...).
Answer = Callable[[LLMRequest], "str | tuple[str, list[ToolCall]]"]
ANSWERS: dict[str, Answer] = {}


def register(purpose: str, answer: Answer) -> None:
    ANSWERS[purpose] = answer


def _answer_for(purpose: str) -> Answer:
    found = ANSWERS.get(purpose) or ANSWERS.get(purpose.split(".", 1)[0] + ".*")
    return found or _generic


class ScriptedProvider:
    provider = PROVIDER

    def __init__(self, model: str = MODEL) -> None:
        self.model = model  # a role's model (tasks.services.llm.roles) is recorded as named

    def complete(self, req: LLMRequest) -> LLMResult:
        answered = _answer_for(req.purpose)(req)
        text, calls = (answered, []) if isinstance(answered, str) else answered
        prompt = req.system + json.dumps(req.messages, sort_keys=True, default=str)
        spoken = text + json.dumps([c.input for c in calls])
        return LLMResult(text=text, tool_calls=calls,
                         usage=Usage(_tokens(prompt), _tokens(spoken)), model=self.model,
                         provider=PROVIDER, stop_reason="tool_use" if calls else "end_turn",
                         cost_usd=0.0)

    def stream(self, req: LLMRequest, on_text: Callable[[str], None]) -> LLMResult:
        result = self.complete(req)
        pause = get_settings().scripted_stream_seconds
        for i, chunk in enumerate(chunks(result.text, STREAM_CHUNKS)):
            if i and pause:
                time.sleep(pause)
            on_text(chunk)
        return result


def _generic(req: LLMRequest) -> str:
    said = str(req.context.get("user_message") or last_user_text(req.messages)).strip()
    return f"[scripted] {said[:400] or req.context.get('goal') or 'build something people pay for'}"


def chunks(text: str, count: int) -> list[str]:
    """`text` cut at word boundaries into about `count` pieces that join back to it."""
    words = re.findall(r"\S+\s*|\s+", text)
    size = max(1, math.ceil(len(words) / count))
    return ["".join(words[i:i + size]) for i in range(0, len(words), size)]


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""
