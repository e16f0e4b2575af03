"""Retry policy as data plus a pure decision function of (attempt, error)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from tasks.engine.errors import PermanentError, RetryableError


@dataclass(frozen=True)
class RetryPolicy:
    base_seconds: float = 1.0
    factor: float = 2.0
    max_seconds: float = 300.0
    jitter: float = 0.5  # fraction of the delay that is randomised (0 = none, 1 = full jitter)


@dataclass(frozen=True)
class Retry:
    delay: float
    count_attempt: bool = True


@dataclass(frozen=True)
class Fail:
    permanent: bool
    reason: str | None = None  # why retrying stopped, when the error alone does not say


@dataclass(frozen=True)
class RetryLimits:
    """Bounds no job type can lift: retries that cost no attempt (a provider's 429)
    would otherwise go on forever, and a provider's Retry-After could park a job for
    a year. `free_retries` / `free_seconds`: what the job has used so far."""

    free_retries: int = 0
    free_seconds: float = 0.0
    max_free_retries: int = 100
    max_free_seconds: float = 6 * 3600.0
    max_delay: float = 3600.0


Decision = Retry | Fail


def compute_backoff(attempt: int, policy: RetryPolicy, rand: float | None = None) -> float:
    """Exponential in the attempt number, capped, with the top `jitter` share randomised."""
    raw = policy.base_seconds * policy.factor ** max(attempt - 1, 0)
    capped = min(raw, policy.max_seconds)
    r = random.random() if rand is None else rand
    return capped * (1 - policy.jitter) + capped * policy.jitter * r


def decide(
    attempt: int, max_attempts: int, error: BaseException, policy: RetryPolicy,
    rand: float | None = None, limits: RetryLimits | None = None,
) -> Decision:
    """What to do after attempt number `attempt` (1-based) raised `error`.

    Unknown errors retry: a bug fixed and deployed should not need a manual retry.
    """
    limits = limits or RetryLimits()
    if isinstance(error, PermanentError):
        return Fail(permanent=True)
    if isinstance(error, RetryableError) and not error.count_attempt:
        if limits.free_retries >= limits.max_free_retries:
            return Fail(permanent=True, reason=(
                f"gave up after {limits.free_retries} retries that cost no attempt "
                f"(SWITCHYARD_FREE_RETRY_MAX)"))
        if limits.free_seconds >= limits.max_free_seconds:
            return Fail(permanent=True, reason=(
                f"gave up after {limits.free_seconds:.0f}s of retries that cost no attempt "
                f"(SWITCHYARD_FREE_RETRY_MAX_SECONDS)"))
        # Backoff grows with the free retries themselves: the attempt number stands still.
        delay = error.delay if error.delay is not None else compute_backoff(
            limits.free_retries + 1, policy, rand)
        return Retry(delay=min(delay, limits.max_delay), count_attempt=False)
    if attempt >= max_attempts:
        return Fail(permanent=False)
    if isinstance(error, RetryableError) and error.delay is not None:
        return Retry(delay=min(error.delay, limits.max_delay))
    return Retry(delay=min(compute_backoff(attempt, policy, rand), limits.max_delay))
