"""The LLM layer: one client interface, a real and a scripted provider, and flow control.

Handlers call `get_client()` for the configured provider and go through
`tasks.services.llm.flow.call_llm` inside a checkpointed step.
"""

from __future__ import annotations

import os
from functools import lru_cache

from tasks.services.llm.types import LLMClient, LLMRequest, LLMResult, ToolCall, Usage
from tasks.settings import SettingsError, get_settings

__all__ = ["LLMClient", "LLMRequest", "LLMResult", "ToolCall", "Usage", "get_client",
           "reset_client"]

PROVIDERS = ("scripted", "anthropic", "openai")


def get_client() -> LLMClient:
    """The provider SWITCHYARD_LLM_PROVIDER names, built once per process.

    Keyed by pid: a forked worker child builds its own, since an HTTP connection
    pool inherited across fork() would share sockets with the parent.
    """
    return _client_for_process(os.getpid())


def reset_client() -> None:
    """Forget the built client, so the next get_client() reads the settings again."""
    _client_for_process.cache_clear()


@lru_cache(maxsize=1)
def _client_for_process(pid: int) -> LLMClient:
    settings = get_settings()
    if settings.llm_provider == "scripted":
        from tasks.services.llm.scripted import ScriptedProvider

        return ScriptedProvider()
    if settings.llm_provider == "anthropic":
        # Imported here: the scripted default never loads the SDK.
        from tasks.services.llm.anthropic_provider import AnthropicProvider

        if not settings.anthropic_api_key:
            raise SettingsError("SWITCHYARD_LLM_PROVIDER=anthropic needs ANTHROPIC_API_KEY")
        return AnthropicProvider(api_key=settings.anthropic_api_key,
                                 base_url=settings.anthropic_base_url, model=settings.llm_model,
                                 timeout=settings.llm_timeout_seconds,
                                 max_tokens_cap=settings.llm_max_tokens)
    if settings.llm_provider == "openai":
        from tasks.services.llm.openai_provider import OpenAIProvider

        # A self-hosted server (vLLM, Ollama, llama.cpp) usually asks for no key; the SDK
        # insists on one, so a placeholder goes with a base URL of the operator's choosing.
        if not settings.openai_api_key and not settings.openai_base_url:
            raise SettingsError("SWITCHYARD_LLM_PROVIDER=openai needs OPENAI_API_KEY (or "
                                "OPENAI_BASE_URL for a server that asks for none)")
        return OpenAIProvider(api_key=settings.openai_api_key or "unused",
                              base_url=settings.openai_base_url or "https://api.openai.com/v1",
                              model=settings.llm_model, timeout=settings.llm_timeout_seconds,
                              max_tokens_cap=settings.llm_max_tokens)
    raise SettingsError(f"SWITCHYARD_LLM_PROVIDER must be one of {PROVIDERS}, "
                        f"got {settings.llm_provider!r}")
