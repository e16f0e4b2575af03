"""Retry policy as data plus a pure decision function of (attempt, error)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from tasks.errors import PermanentError, RetryableError


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


Decision = Retry | Fail


def compute_backoff(attempt: int, policy: RetryPolicy, rand: float | None = None) -> float:
    """Exponential in the attempt number, capped, with the top `jitter` share randomised."""
    raw = policy.base_seconds * policy.factor ** max(attempt - 1, 0)
    capped = min(raw, policy.max_seconds)
    r = random.random() if rand is None else rand
    return capped * (1 - policy.jitter) + capped * policy.jitter * r


def decide(
    attempt: int, max_attempts: int, error: BaseException, policy: RetryPolicy,
    rand: float | None = None,
) -> Decision:
    """What to do after attempt number `attempt` (1-based) raised `error`.

    Unknown errors retry: a bug fixed and deployed should not need a manual retry.
    """
    if isinstance(error, PermanentError):
        return Fail(permanent=True)
    if isinstance(error, RetryableError) and not error.count_attempt:
        delay = error.delay if error.delay is not None else compute_backoff(attempt, policy, rand)
        return Retry(delay=delay, count_attempt=False)
    if attempt >= max_attempts:
        return Fail(permanent=False)
    if isinstance(error, RetryableError) and error.delay is not None:
        return Retry(delay=error.delay)
    return Retry(delay=compute_backoff(attempt, policy, rand))
