"""The real provider: Anthropic's Messages API through the official SDK.

The SDK's own retries are off (`max_retries=0`): Switchyard's retry policy and the
shared provider pause decide when to call again, so a rate limit seen by one worker
slows every worker instead of each one hammering the API on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
from anthropic.types import Message

from tasks.engine.errors import PermanentError, RetryableError, SwitchyardError
from tasks.services.llm.errors import ProviderBusy
from tasks.services.llm.pricing import cost_usd
from tasks.services.llm.retry_after import retry_after
from tasks.services.llm.types import LLMRequest, LLMResult, ToolCall, Usage

PROVIDER = "anthropic"
BUSY_STATUSES = (429, 529)  # rate limited, overloaded
BUSY_TYPES = ("rate_limit_error", "overloaded_error")  # the same, as a mid-stream error event


class AnthropicProvider:
    """An LLMClient over `anthropic.Anthropic`. The API key goes to the SDK and nowhere else."""

    provider = PROVIDER

    def __init__(self, *, api_key: str, base_url: str, model: str, timeout: float,
                 max_tokens_cap: int = 4096):
        self.model = model
        self._max_tokens_cap = max_tokens_cap
        self._client = anthropic.Anthropic(base_url=base_url, api_key=api_key,
                                           max_retries=0, timeout=timeout)

    def complete(self, req: LLMRequest) -> LLMResult:
        with _mapped_errors():
            message = self._client.messages.create(**self._params(req))
        return self._result(message)

    def stream(self, req: LLMRequest, on_text: Callable[[str], None]) -> LLMResult:
        with _mapped_errors(), self._client.messages.stream(**self._params(req)) as stream:
            for text in stream.text_stream:
                on_text(text)
            message = stream.get_final_message()
        return self._result(message)

    def _params(self, req: LLMRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": min(req.max_tokens, self._max_tokens_cap),
            "messages": req.messages,
        }
        if req.system:
            params["system"] = req.system
        if req.tools:
            params["tools"] = req.tools
        return params

    def _result(self, message: Message) -> LLMResult:
        usage = _usage(message)
        return LLMResult(
            text="".join(block.text for block in message.content if block.type == "text"),
            tool_calls=[ToolCall(id=block.id, name=block.name, input=dict(block.input))
                        for block in message.content if block.type == "tool_use"],
            usage=usage,
            model=message.model,
            provider=PROVIDER,
            stop_reason=message.stop_reason,
            cost_usd=cost_usd(message.model, usage),
        )


def _usage(message: Message) -> Usage:
    """Tokens billed. Cache reads and writes count as input: budgets err on the safe side."""
    u = message.usage
    cached = (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)
    return Usage(input_tokens=u.input_tokens + cached, output_tokens=u.output_tokens)


@contextmanager
def _mapped_errors() -> Iterator[None]:
    try:
        yield
    except anthropic.APIError as exc:
        raise map_error(exc) from exc


def map_error(exc: anthropic.APIError) -> SwitchyardError:
    """Say what the job should do about an SDK error: wait (busy), retry, or give up."""
    if isinstance(exc, anthropic.APIConnectionError):  # includes timeouts
        return RetryableError(f"anthropic unreachable: {exc}")
    if not isinstance(exc, anthropic.APIStatusError):  # e.g. a response the SDK cannot parse
        return RetryableError(f"anthropic answered oddly: {exc}")
    status, kind = exc.status_code, exc.type
    what = f"anthropic {status} {kind or 'error'}: {exc.api_message or exc.message}"
    if exc.request_id:
        what += f" (request-id {exc.request_id})"
    if status in BUSY_STATUSES or kind in BUSY_TYPES:
        return ProviderBusy(PROVIDER, retry_after(exc.response.headers), what,
                            overloaded=status == 529 or kind == "overloaded_error")
    # 408/409 are the API's own "try again"; a 200 carrying an error is a stream cut short.
    if status >= 500 or status in (408, 409) or status < 400:
        return RetryableError(what)
    return PermanentError(what)
