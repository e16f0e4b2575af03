"""The model's conversation kept under a token budget: old tool output shortened first, then the
oldest turns replaced by a summary, never breaking the Messages API's tool_use/tool_result rule."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from typing import Any

Message = dict[str, Any]

# An estimate, not a tokenizer: about four characters a token for English and code (Claude's
# tokenizer is not public). Content is measured as its JSON, so block structure, keys and ids
# count too, and every message adds a little for its role and framing. Text in scripts such as
# Chinese runs nearer one token a character: there this underestimates.
CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_CHARS = 16
# A tool result or a tool input string shorter than this is left alone: its stub would not
# save enough to be worth losing it.
ELIDE_OVER_CHARS = 300
SUMMARY_MAX_CALLS = 40


def estimate_tokens(messages: Sequence[Message], system: str = "") -> int:
    """Roughly how many input tokens `messages` (and `system`) cost: characters / 4, rounded up."""
    return math.ceil((len(system) + sum(_chars(m) for m in messages)) / CHARS_PER_TOKEN)


def fit(messages: Sequence[Message], budget_tokens: int, *, keep_last: int = 6,
        system: str = "", keep_first: bool = True) -> list[Message]:
    """`messages` made to fit `budget_tokens`, the input untouched.

    First the tool results (and long tool inputs) of all but the last `keep_last` messages are
    shortened to stubs, oldest first, until the estimate fits. If it still does not, the oldest
    turns are cut, up to an assistant turn (so each tool_result kept answers a tool_use kept),
    and a summary of the tool calls cut takes their place: appended to the first message (the
    task), or with `keep_first=False` as a user message of its own that replaces it too. When
    even that is too much, fewer of the latest messages are kept whole; what comes back may
    still be over budget then (it is the least this can make it: compare `estimate_tokens`).
    """
    if estimate_tokens(messages, system) <= budget_tokens:
        return copy.deepcopy(list(messages))
    limit = budget_tokens * CHARS_PER_TOKEN - len(system)
    result: list[Message] = []
    for keep in range(max(keep_last, 1), 0, -1):
        result = _fit_keeping(copy.deepcopy(list(messages)), limit, keep, keep_first)
        if sum(_chars(m) for m in result) <= limit:
            break
    return result


def _fit_keeping(messages: list[Message], limit: int, keep: int, keep_first: bool
                 ) -> list[Message]:
    sizes = [_chars(m) for m in messages]
    names = _tool_names(messages)
    old = max(0, len(messages) - keep)
    for i in range(old):
        if sum(sizes) <= limit:
            return messages
        if _elide(messages[i], names):
            sizes[i] = _chars(messages[i])
    if sum(sizes) <= limit:
        return messages

    start = 1 if keep_first else 0
    best = messages
    for cut in range(start + 1, old + 1):  # the first cut that fits: as little lost as may be
        if messages[cut]["role"] != "assistant":
            continue
        head = _with_summary(messages[0], messages[1:cut]) if keep_first else \
            {"role": "user", "content": summarise(messages[:cut])}
        best = [head, *messages[cut:]]
        if _chars(head) + sum(sizes[cut:]) <= limit:
            break
    return best


def _chars(message: Message) -> int:
    return MESSAGE_OVERHEAD_CHARS + len(json.dumps(message.get("content", ""), ensure_ascii=False))


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    return {block["id"]: block.get("name", "tool") for block in _blocks(messages)
            if block.get("type") == "tool_use" and "id" in block}


def _blocks(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [b for m in messages if isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict)]


def _elide(message: Message, names: dict[str, str]) -> bool:
    """Stub the message's long tool results and tool input strings, in place; whether any."""
    changed = False
    for block in _blocks([message]):
        if block.get("type") == "tool_result":
            size = _content_chars(block.get("content", ""))
            if size > ELIDE_OVER_CHARS:
                tool = names.get(block.get("tool_use_id", ""), "a tool")
                block["content"] = f"[output of {tool} elided; {size} chars]"
                changed = True
        elif block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
            for key, value in block["input"].items():
                if isinstance(value, str) and len(value) > ELIDE_OVER_CHARS:
                    block["input"][key] = f"[{len(value)} chars elided]"
                    changed = True
    return changed


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) if isinstance(b, dict) and "text" in b
                   else len(json.dumps(b, ensure_ascii=False)) for b in content)
    return len(json.dumps(content, ensure_ascii=False))


def _with_summary(first: Message, cut: Sequence[Message]) -> Message:
    """The first message with a note of what the cut turns did appended."""
    summary = summarise(cut)
    content = first.get("content", "")
    if isinstance(content, str):
        return {**first, "content": [{"type": "text", "text": content},
                                     {"type": "text", "text": summary}]}
    return {**first, "content": [*content, {"type": "text", "text": summary}]}


def summarise(turns: Sequence[Message]) -> str:
    """The tool calls made in `turns`, one line each (the tool and what it acted on)."""
    failed = {b.get("tool_use_id") for b in _blocks(turns)
              if b.get("type") == "tool_result" and b.get("is_error")}
    calls = [f"- {b.get('name', 'tool')} {_target(b.get('input'))}".rstrip()
             + (" (failed)" if b.get("id") in failed else "")
             for b in _blocks(turns) if b.get("type") == "tool_use"]
    if len(calls) > SUMMARY_MAX_CALLS:
        calls = [*calls[:SUMMARY_MAX_CALLS], f"- … and {len(calls) - SUMMARY_MAX_CALLS} more"]
    done = "\n".join(calls) if calls else "(no tool calls)"
    return (f"[{len(turns)} earlier messages were removed to fit the context window. "
            f"The tool calls they made, oldest first:\n{done}\n"
            "Re-read any file you need: its content then may have changed since.]")


def _target(arguments: Any) -> str:
    """What a tool call acted on: its path, command or pattern, else its first short value."""
    if not isinstance(arguments, dict):
        return ""
    for key in ("path", "command", "pattern", "query"):
        if isinstance(arguments.get(key), str):
            return _short(arguments[key])
    values = [v for v in arguments.values() if isinstance(v, str | int | float)]
    return _short(str(values[0])) if values else ""


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
