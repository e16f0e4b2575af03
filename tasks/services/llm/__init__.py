"""The LLM layer: one client interface, a real and a scripted provider, and flow control.

Handlers call `get_client()` for the configured provider and go through
`tasks.services.llm.flow.call_llm` inside a checkpointed step.
"""

from __future__ import annotations

import os
from functools import lru_cache

from tasks.services.llm.types import LLMClient, LLMRequest, LLMResult, ToolCall, Usage
from tasks.settings import Settings, SettingsError, add_check, get_settings

__all__ = ["LLMClient", "LLMRequest", "LLMResult", "ToolCall", "Usage", "client_for",
           "get_client", "reset_client"]

PROVIDERS = ("scripted", "anthropic", "openai")


def get_client() -> LLMClient:
    """The provider and model SWITCHYARD_LLM_PROVIDER / _MODEL name, built once per process.

    `flow.call_llm` hands a call made with this client to its role's model when the
    operator or the project chose one (tasks.services.llm.roles).
    """
    settings = get_settings()
    # Cached on its own: `flow.for_role` knows the default by identity, which no role's
    # client may evict.
    return _default_for_process(os.getpid(), settings.llm_provider, settings.llm_model)


def client_for(provider: str, model: str) -> LLMClient:
    """A client of `provider` asking `model`, built once per process (keyed by pid: a forked
    worker child builds its own, since an HTTP connection pool inherited across fork()
    would share sockets with the parent)."""
    return _client_for_process(os.getpid(), provider, model)


def unconfigured(provider: str, settings: Settings | None = None) -> str | None:
    """What the operator must set before `provider` can answer, or None when it can."""
    settings = settings or get_settings()
    if provider == "anthropic" and not settings.anthropic_api_key:
        return "SWITCHYARD_LLM_PROVIDER=anthropic needs ANTHROPIC_API_KEY"
    if provider == "openai" and not settings.openai_api_key and not settings.openai_base_url:
        return ("SWITCHYARD_LLM_PROVIDER=openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for "
                "a server that asks for none)")
    return None


def reset_client() -> None:
    """Forget the built clients, so the next get_client() reads the settings again."""
    _default_for_process.cache_clear()
    _client_for_process.cache_clear()


@lru_cache(maxsize=1)
def _default_for_process(pid: int, provider: str, model: str) -> LLMClient:
    return _build(provider, model)


@lru_cache(maxsize=32)
def _client_for_process(pid: int, provider: str, model: str) -> LLMClient:
    return _build(provider, model)


def _build(provider: str, model: str) -> LLMClient:
    settings = get_settings()
    if provider == "scripted":
        from tasks.services.llm.scripted import ScriptedProvider

        # The offline provider answers by purpose; a model named for it is only recorded.
        return ScriptedProvider(model)
    if provider == "anthropic":
        # Imported here: the scripted default never loads the SDK.
        from tasks.services.llm.anthropic_provider import AnthropicProvider

        if (missing := unconfigured(provider)) is not None:
            raise SettingsError(missing)
        return AnthropicProvider(api_key=settings.anthropic_api_key,
                                 base_url=settings.anthropic_base_url, model=model,
                                 timeout=settings.llm_timeout_seconds,
                                 max_tokens_cap=settings.llm_max_tokens)
    if provider == "openai":
        from tasks.services.llm.openai_provider import OpenAIProvider

        if (missing := unconfigured(provider)) is not None:
            raise SettingsError(missing)
        # A self-hosted server (vLLM, Ollama, llama.cpp) usually asks for no key; the SDK
        # insists on one, so a placeholder goes with a base URL of the operator's choosing.
        return OpenAIProvider(api_key=settings.openai_api_key or "unused",
                              base_url=settings.openai_base_url or "https://api.openai.com/v1",
                              model=model, timeout=settings.llm_timeout_seconds,
                              max_tokens_cap=settings.llm_max_tokens)
    raise SettingsError(f"SWITCHYARD_LLM_PROVIDER must be one of {PROVIDERS}, "
                        f"got {provider!r}")


def _check(settings: Settings) -> None:
    """The default provider and each role's must be known and configured when a process
    starts: found only when a job first called a model, the operator's mistake failed every
    attempt of every job, in the tenant's words."""
    from tasks.services.llm.roles import operator_choices

    if settings.llm_provider not in PROVIDERS:
        raise ValueError(f"SWITCHYARD_LLM_PROVIDER must be one of {PROVIDERS}, "
                         f"got {settings.llm_provider!r}")
    providers = {settings.llm_provider} | {
        p for p, _ in operator_choices(settings.llm_role_models).values() if p}
    for provider in sorted(providers):
        if (missing := unconfigured(provider, settings)) is not None:
            raise ValueError(missing)


add_check(_check)
