"""Token buckets per key, per web process: requests per token, failed sign-ins per address."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass
class Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(self, rate: float, burst: float, max_keys: int = 100_000):
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str, now: float | None = None) -> float:
        """Take one request; returns 0 when allowed, else seconds until one would be."""
        now = time.monotonic() if now is None else now
        with self._lock:
            b = self._refilled(key, now)
            if b.tokens >= 1:
                b.tokens -= 1
                return 0.0
            return (1 - b.tokens) / self.rate

    def wait(self, key: str, now: float | None = None) -> float:
        """Seconds until `key` could take one request (0: now), taking nothing."""
        now = time.monotonic() if now is None else now
        with self._lock:
            b = self._buckets.get(key)
            if b is None:
                return 0.0
            tokens = min(self.burst, b.tokens + (now - b.updated) * self.rate)
            return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def __contains__(self, key: str) -> bool:
        """Whether `key` has taken a request from this limiter (and was not forgotten)."""
        return key in self._buckets

    def _refilled(self, key: str, now: float) -> Bucket:
        b = self._buckets.get(key)
        if b is None:
            if len(self._buckets) >= self.max_keys:
                self._forget(now)
            b = self._buckets[key] = Bucket(self.burst, now)
        b.tokens = min(self.burst, b.tokens + (now - b.updated) * self.rate)
        b.updated = now
        return b

    def _forget(self, now: float) -> None:
        """Keys come from clients (addresses): a full bucket is as good as none, so drop
        those; if every one is in use, the oldest half, so memory stays bounded."""
        full = [k for k, b in self._buckets.items()
                if b.tokens + (now - b.updated) * self.rate >= self.burst]
        for k in full:
            del self._buckets[k]
        if len(self._buckets) >= self.max_keys:
            for k in list(self._buckets)[: len(self._buckets) // 2]:
                del self._buckets[k]
