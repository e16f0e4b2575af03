"""Any OpenAI-compatible model: Chat Completions through the official `openai` SDK.

OpenAI, Gemini (its OpenAI-compatible endpoint), vLLM, Ollama and llama.cpp's server all
serve it. Switchyard's requests are in the Messages shape (content blocks `text`,
`tool_use`, `tool_result`; tools with an `input_schema`); this module translates both ways,
so handlers, the coding agent's loop and the replay of a checkpointed call are the same
whatever the provider. As with Anthropic, the SDK's own retries are off: the shared
provider pause and the job's retry policy decide when to call again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import openai

from tasks.engine.errors import PermanentError, RetryableError, SwitchyardError
from tasks.services.llm.errors import ProviderBusy
from tasks.services.llm.pricing import cost_usd
from tasks.services.llm.retry_after import DEFAULT_RETRY_AFTER, retry_after
from tasks.services.llm.types import LLMRequest, LLMResult, ToolCall, Usage

PROVIDER = "openai"
# finish_reason in the engine's words (Anthropic's stop_reason), which the loops read.
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                "length": "max_tokens"}
CHARS_PER_TOKEN = 4  # a server that reports no usage is charged by this estimate


class OpenAIProvider:
    """An LLMClient over `openai.OpenAI`. The API key goes to the SDK and nowhere else."""

    provider = PROVIDER

    def __init__(self, *, api_key: str, base_url: str, model: str, timeout: float,
                 max_tokens_cap: int = 4096):
        self.model = model
        self._max_tokens_cap = max_tokens_cap
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                     timeout=timeout)

    def complete(self, req: LLMRequest) -> LLMResult:
        with _mapped_errors():
            completion = self._client.chat.completions.create(**self._params(req))
        if not completion.choices:
            raise RetryableError("openai answered with no choices")
        choice = completion.choices[0]
        message = choice.message
        calls: list[tuple[str, ...]] = [
            (c.id, c.function.name, c.function.arguments)
            for c in message.tool_calls or [] if getattr(c, "function", None)]
        usage = (Usage(completion.usage.prompt_tokens, completion.usage.completion_tokens)
                 if completion.usage else None)
        return self._result(message.content or "", calls, choice.finish_reason, usage,
                            completion.model, req)

    def stream(self, req: LLMRequest, on_text: Callable[[str], None]) -> LLMResult:
        texts: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments so far]
        finish: str | None = None
        usage: Usage | None = None
        model = self.model
        with _mapped_errors():
            chunks = self._client.chat.completions.create(
                **self._params(req), stream=True, stream_options={"include_usage": True})
            for chunk in chunks:
                model = chunk.model or model
                if chunk.usage:
                    usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta.content:
                        texts.append(delta.content)
                        on_text(delta.content)
                    for piece in delta.tool_calls or []:
                        slot = calls.setdefault(piece.index, ["", "", ""])
                        slot[0] = piece.id or slot[0]
                        if piece.function is not None:
                            slot[1] = slot[1] or piece.function.name or ""
                            slot[2] += piece.function.arguments or ""
                    finish = choice.finish_reason or finish
        return self._result("".join(texts), [tuple(calls[i]) for i in sorted(calls)], finish,
                            usage, model, req)

    def _params(self, req: LLMRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": min(req.max_tokens, self._max_tokens_cap),
            "messages": chat_messages(req.system, req.messages),
        }
        if req.tools:
            params["tools"] = [chat_tool(tool) for tool in req.tools]
        return params

    def _result(self, text: str, calls: list[tuple[str, ...]], finish: str | None,
                usage: Usage | None, model: str, req: LLMRequest) -> LLMResult:
        if usage is None:  # a server without usage reports: budgets still count something
            sent = len(req.system) + len(json.dumps(req.messages))
            usage = Usage(sent // CHARS_PER_TOKEN, len(text) // CHARS_PER_TOKEN + 1)
        tool_calls = [ToolCall(id=call_id or f"call_{n}", name=name, input=_arguments(raw))
                      for n, (call_id, name, raw) in enumerate(calls)]
        return LLMResult(text=text, tool_calls=tool_calls, usage=usage, model=model or self.model,
                         provider=PROVIDER,
                         stop_reason=STOP_REASONS.get(finish or "", finish),
                         cost_usd=cost_usd(model or self.model, usage))


def chat_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages-API turns as Chat Completions messages.

    An assistant turn's `tool_use` blocks become its `tool_calls`; a user turn's
    `tool_result` blocks become `tool` messages, placed first, since each must follow the
    assistant message that called it.
    """
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for turn in messages:
        role, content = turn["role"], turn["content"]
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type")
            if kind == "text":
                texts.append(block["text"])
            elif kind == "tool_use":
                calls.append({"id": block["id"], "type": "function",
                              "function": {"name": block["name"],
                                           "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result":
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                            "content": _result_text(block)})
            else:
                raise PermanentError(f"the openai provider cannot send a {kind!r} block")
        if role == "assistant" and (texts or calls):
            message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if calls:
                message["tool_calls"] = calls
            out.append(message)
        elif texts:
            out.append({"role": role, "content": "\n".join(texts)})
    return out


def chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A Messages-API tool ({name, description, input_schema}) as a Chat Completions one."""
    return {"type": "function", "function": {
        "name": tool["name"], "description": tool.get("description", ""),
        "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}}


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    text = content if isinstance(content, str) else "\n".join(
        part.get("text", "") for part in content if isinstance(part, dict))
    return f"[error] {text}" if block.get("is_error") else text


def _arguments(raw: str) -> dict[str, Any]:
    """A tool call's arguments. Models do write broken JSON: the tool then refuses it and
    the model sees why, instead of the whole call failing."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_unparsed_arguments": raw}
    return value if isinstance(value, dict) else {"_unparsed_arguments": raw}


@contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except openai.APIError as exc:
        raise map_error(exc) from exc


def map_error(exc: openai.APIError) -> SwitchyardError:
    """Say what the job should do about an SDK error: wait (busy), retry, or give up."""
    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return RetryableError(f"openai-compatible server unreachable: {exc}")
    if not isinstance(exc, openai.APIStatusError):
        # An error event mid-stream, or an answer the SDK cannot parse.
        if "rate" in str(exc).lower() and "limit" in str(exc).lower():
            return ProviderBusy(PROVIDER, DEFAULT_RETRY_AFTER, f"openai: {exc}")
        return RetryableError(f"openai answered oddly: {exc}")
    status = exc.status_code
    what = f"openai {status}: {exc.message}"
    if exc.request_id:
        what += f" (request-id {exc.request_id})"
    if status == 429 and getattr(exc, "code", None) == "insufficient_quota":
        return PermanentError(what)  # a billing limit, not a rate: waiting will not help
    if status == 429:
        return ProviderBusy(PROVIDER, retry_after(exc.response.headers), what)
    if status >= 500 or status in (408, 409):
        return RetryableError(what)
    return PermanentError(what)
