"""The one LLM-specific error: the provider told us to back off.

It is a RetryableError that gives the attempt back, so a handler that lets it
through simply waits; `flow.call_llm` also turns it into a pause every worker sees.
"""

from __future__ import annotations

from tasks.engine.errors import RetryableError


class ProviderBusy(RetryableError):
    """A 429 (rate limited) or 529 (overloaded): not the job's fault, so no attempt is used."""

    def __init__(self, provider: str, retry_after: float, message: str, *,
                 overloaded: bool = False):
        super().__init__(message, delay=retry_after, count_attempt=False)
        self.provider = provider
        self.retry_after = retry_after
        # The provider as a whole is overloaded (Anthropic's 529), not one model's rate limit
        # reached: every model of it waits.
        self.overloaded = overloaded
