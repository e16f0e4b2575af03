"""Retry policy: the backoff curve and the pure decide(attempt, error) function."""

from __future__ import annotations

import random

import pytest

from tasks.engine.errors import (
    InvalidPayload,
    JobTimeout,
    NonDeterministicStep,
    PermanentError,
    RetryableError,
    UnknownJobType,
)
from tasks.engine.retry import Fail, Retry, RetryLimits, RetryPolicy, compute_backoff, decide

NO_JITTER = RetryPolicy(base_seconds=1.0, factor=2.0, max_seconds=300.0, jitter=0.0)
HALF = RetryPolicy(base_seconds=1.0, factor=2.0, max_seconds=300.0, jitter=0.5)
FULL = RetryPolicy(base_seconds=1.0, factor=2.0, max_seconds=300.0, jitter=1.0)


@pytest.mark.parametrize(
    ("attempt", "policy", "expected"),
    [
        pytest.param(1, NO_JITTER, 1.0, id="first retry waits base_seconds"),
        pytest.param(2, NO_JITTER, 2.0, id="doubles after the second attempt"),
        pytest.param(3, NO_JITTER, 4.0, id="doubles again"),
        pytest.param(9, NO_JITTER, 256.0, id="last step under the cap"),
        pytest.param(10, NO_JITTER, 300.0, id="512 is capped at max_seconds"),
        pytest.param(60, NO_JITTER, 300.0, id="huge attempt numbers stay capped (no overflow)"),
        pytest.param(0, NO_JITTER, 1.0, id="attempt 0 is treated as the first"),
        pytest.param(3, RetryPolicy(base_seconds=0.5, factor=3.0, jitter=0.0), 4.5,
                     id="base and factor both apply: 0.5 * 3**2"),
    ],
)
def test_backoff_is_exponential_and_capped(attempt: int, policy: RetryPolicy,
                                           expected: float) -> None:
    assert compute_backoff(attempt, policy, rand=0.37) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("attempt", "policy", "rand", "expected"),
    [
        pytest.param(3, HALF, 0.0, 2.0, id="half jitter, rand=0: the fixed half of 4s"),
        pytest.param(3, HALF, 1.0, 4.0, id="half jitter, rand=1: the whole 4s"),
        pytest.param(3, HALF, 0.5, 3.0, id="half jitter, rand=0.5: midway"),
        pytest.param(3, FULL, 0.0, 0.0, id="full jitter, rand=0: may retry at once"),
        pytest.param(3, FULL, 1.0, 4.0, id="full jitter, rand=1: the whole 4s"),
        pytest.param(20, HALF, 0.0, 150.0, id="jitter applies to the capped delay (low end)"),
        pytest.param(20, HALF, 1.0, 300.0, id="jitter never exceeds max_seconds"),
    ],
)
def test_jitter_bounds(attempt: int, policy: RetryPolicy, rand: float, expected: float) -> None:
    assert compute_backoff(attempt, policy, rand=rand) == pytest.approx(expected)


def test_random_jitter_stays_within_bounds_and_varies() -> None:
    random.seed(1234)
    delays = [compute_backoff(4, HALF) for _ in range(500)]
    assert all(4.0 <= d <= 8.0 for d in delays)
    assert max(delays) - min(delays) > 3.0, "jitter should spread delays over the range"


BACKOFF_1 = compute_backoff(1, HALF, rand=0.25)


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "error", "expected"),
    [
        pytest.param(1, 5, PermanentError("bad input"), Fail(permanent=True),
                     id="PermanentError fails at once, attempts left or not"),
        pytest.param(1, 5, NonDeterministicStep("x"), Fail(permanent=True),
                     id="non-determinism is permanent: a retry would hit it again"),
        pytest.param(1, 5, InvalidPayload("x"), Fail(permanent=True),
                     id="an invalid payload will stay invalid"),
        pytest.param(1, 5, UnknownJobType("x"), Fail(permanent=True),
                     id="an unknown job type will stay unknown"),
        pytest.param(1, 5, JobTimeout("x"), Fail(permanent=True),
                     id="a timed-out job does not get another go"),
        pytest.param(1, 3, ValueError("boom"), Retry(delay=BACKOFF_1),
                     id="unknown errors retry with backoff: a deployed fix needs no manual retry"),
        pytest.param(2, 3, RetryableError("flaky"), Retry(delay=compute_backoff(2, HALF, 0.25)),
                     id="RetryableError retries with the attempt's backoff"),
        pytest.param(3, 3, ValueError("boom"), Fail(permanent=False),
                     id="unknown error on the last attempt fails (not permanent)"),
        pytest.param(3, 3, RetryableError("flaky"), Fail(permanent=False),
                     id="RetryableError on the last attempt fails too"),
        pytest.param(5, 3, ValueError("boom"), Fail(permanent=False),
                     id="beyond max_attempts (e.g. max lowered) fails"),
        pytest.param(1, 3, RetryableError("429", delay=7.5), Retry(delay=7.5),
                     id="delay override (Retry-After) replaces the computed backoff"),
        pytest.param(3, 3, RetryableError("429", delay=7.5), Fail(permanent=False),
                     id="a delay override does not grant extra attempts"),
        pytest.param(3, 3, RetryableError("rate limited", count_attempt=False),
                     Retry(delay=compute_backoff(1, HALF, 0.25), count_attempt=False),
                     id="count_attempt=False retries even on the last attempt, attempt refunded"),
        pytest.param(1, 1, RetryableError("rate limited", delay=2.0, count_attempt=False),
                     Retry(delay=2.0, count_attempt=False),
                     id="count_attempt=False honours a delay override"),
        pytest.param(1, 1, ValueError("boom"), Fail(permanent=False),
                     id="max_attempts=1 never retries"),
    ],
)
def test_decide(attempt: int, max_attempts: int, error: BaseException, expected: object) -> None:
    assert decide(attempt, max_attempts, error, HALF, rand=0.25) == expected


def test_decide_uses_the_policy_of_the_job_type() -> None:
    slow = RetryPolicy(base_seconds=10.0, factor=10.0, max_seconds=1000.0, jitter=0.0)
    assert decide(3, 5, ValueError(), slow) == Retry(delay=1000.0)
    assert decide(2, 5, ValueError(), slow) == Retry(delay=100.0)


FREE = RetryableError("429 with no Retry-After", count_attempt=False)


@pytest.mark.parametrize(
    ("error", "limits", "expected"),
    [
        pytest.param(FREE, RetryLimits(free_retries=4), Retry(delay=compute_backoff(5, HALF, 0.25),
                                                             count_attempt=False),
                     id="free retries back off on their own count: the attempt stands still"),
        pytest.param(FREE, RetryLimits(free_retries=100, max_free_retries=100), Fail(
            permanent=True, reason="gave up after 100 retries that cost no attempt "
                                   "(SWITCHYARD_FREE_RETRY_MAX)"),
                     id="free retries stop at their count cap, saying why"),
        pytest.param(FREE, RetryLimits(free_seconds=7200.0, max_free_seconds=3600.0), Fail(
            permanent=True, reason="gave up after 7200s of retries that cost no attempt "
                                   "(SWITCHYARD_FREE_RETRY_MAX_SECONDS)"),
                     id="free retries stop at their time cap, saying why"),
        pytest.param(RetryableError("429", delay=365 * 86400.0, count_attempt=False),
                     RetryLimits(max_delay=3600.0), Retry(delay=3600.0, count_attempt=False),
                     id="a year of Retry-After is capped (free retry)"),
        pytest.param(RetryableError("503", delay=365 * 86400.0), RetryLimits(max_delay=3600.0),
                     Retry(delay=3600.0), id="a year of Retry-After is capped (counted retry)"),
    ],
)
def test_retries_are_bounded(error: BaseException, limits: RetryLimits, expected: object) -> None:
    assert decide(1, 3, error, HALF, rand=0.25, limits=limits) == expected


def test_a_429_without_retry_after_ends_within_the_caps() -> None:
    # Given a provider that answers 429 with no Retry-After, forever
    limits, waited, tries = RetryLimits(max_free_retries=50, max_free_seconds=3600.0), 0.0, 0
    decision = decide(1, 3, FREE, RetryPolicy(), rand=0.5, limits=limits)
    # When the job retries as decided
    while isinstance(decision, Retry):
        tries, waited = tries + 1, waited + decision.delay
        limits = RetryLimits(free_retries=tries, free_seconds=waited, max_free_retries=50,
                             max_free_seconds=3600.0)
        decision = decide(1, 3, FREE, RetryPolicy(), rand=0.5, limits=limits)
    # Then it fails for good, after backing off instead of hammering once a second
    assert isinstance(decision, Fail) and decision.permanent and decision.reason
    assert tries < 50, "the backoff should reach the time cap before the count cap"
