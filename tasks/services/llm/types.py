"""The values that cross the LLM boundary: one request shape, one result shape, one client protocol.

Handlers build an `LLMRequest`, hand it to `tasks.services.llm.flow.call_llm`, and get an
`LLMResult` back whatever the provider; a result converts to and from plain JSON so a
checkpointed step can store it and replay it without calling the model again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class LLMRequest:
    """What a handler asks of a model.

    `purpose` names the kind of call; the real provider ignores it, the scripted one
    answers by it (each system registers the answers to its own purposes). `context` carries
    the project's own data, by convention: project_name, goal, phase, memory (a list
    of {"category", "key", "content"}), latest_packet, user_message, contact_email,
    deploy_hook_url, github_repo. It is not sent to a real model: put what the model
    must see into `system` / `messages`.
    """

    purpose: str
    system: str
    messages: list[dict[str, Any]]
    max_tokens: int = 1024
    tools: list[dict[str, Any]] | None = None
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class LLMResult:
    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    model: str
    provider: str
    stop_reason: str | None
    cost_usd: float

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON, fit to be a step's output."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMResult:
        """Rebuild a result from `as_dict()` output (e.g. a replayed step)."""
        return cls(
            text=data["text"],
            tool_calls=[ToolCall(**call) for call in data["tool_calls"]],
            usage=Usage(**data["usage"]),
            model=data["model"],
            provider=data["provider"],
            stop_reason=data["stop_reason"],
            cost_usd=data["cost_usd"],
        )


class LLMClient(Protocol):
    """A model provider. Errors come out as Switchyard errors (see tasks.services.llm.errors)."""

    provider: str
    model: str

    def complete(self, req: LLMRequest) -> LLMResult: ...

    def stream(self, req: LLMRequest, on_text: Callable[[str], None]) -> LLMResult: ...
