"""Delta buffering (chat streaming) and the rate limiters: pure, clock injected."""

from __future__ import annotations

from app.http.ratelimit import RateLimiter
from tasks.engine.deltas import DeltaBuffer
from tasks.services.approvals import args_hash


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_deltas_flush_on_time_and_on_size() -> None:
    clock, out = Clock(), []
    buf = DeltaBuffer(out.append, interval=0.25, max_chars=10, clock=clock)
    buf.add("ab")
    buf.add("cd")
    assert out == []  # neither 250 ms nor 10 chars yet
    clock.t = 0.3
    buf.add("e")
    assert out == ["abcde"]  # time
    buf.add("0123456789")
    assert out == ["abcde", "0123456789"]  # size
    buf.add("tail")
    buf.flush()
    buf.flush()
    assert out == ["abcde", "0123456789", "tail"]  # the rest once, empty flushes send nothing


def test_rate_limiter_allows_a_burst_then_paces() -> None:
    limiter = RateLimiter(rate=10, burst=3)
    assert [limiter.acquire("t", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = limiter.acquire("t", now=0.0)
    assert 0.09 < wait <= 0.1  # one token every 100 ms
    assert limiter.acquire("other", now=0.0) == 0.0  # per token, not global
    assert limiter.acquire("t", now=0.1) == 0.0


def test_waiting_is_told_without_taking_and_client_keys_stay_bounded() -> None:
    limiter = RateLimiter(rate=1, burst=2, max_keys=4)
    assert limiter.wait("a", now=0.0) == 0.0 and "a" not in limiter  # asking takes nothing
    limiter.acquire("a", now=0.0)
    limiter.acquire("a", now=0.0)
    assert limiter.wait("a", now=0.5) == 0.5 and limiter.wait("a", now=0.5) == 0.5
    for key in "bcd":
        limiter.acquire(key, now=0.5)
    # A fifth key forgets the buckets that have refilled (b, c, d at 3 s), not a's debt
    limiter.acquire("a", now=2.6)
    limiter.acquire("a", now=2.6)
    limiter.acquire("e", now=3.0)
    assert "a" in limiter and not any(k in limiter for k in "bcd")


def test_an_approval_is_bound_to_its_exact_arguments() -> None:
    a = args_hash("email", {"to": "x@example.com", "subject": "hi"})
    assert a == args_hash("email", {"subject": "hi", "to": "x@example.com"})  # order-free
    assert a != args_hash("email", {"to": "y@example.com", "subject": "hi"})
    assert a != args_hash("deploy_hook", {"to": "x@example.com", "subject": "hi"})
