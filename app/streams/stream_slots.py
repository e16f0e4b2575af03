"""How many event streams (SSE and WebSocket) one credential may hold open in this process.

A stream holds a server thread for its whole life; without a cap one token can
open streams until the web process has no thread left for anybody. The cap is
taken before any 200 is sent (over it: 429 with Retry-After) and given back
when the stream ends, however it ends. It is counted per web process, which is
where the threads run out.
"""

from __future__ import annotations

import threading
from collections import Counter

from flask import g

from app.http.errors import ApiError
from tasks.settings import get_settings

RETRY_AFTER = "5"


class Slot:
    """One open stream; `release` may be called any number of times, it counts once."""

    def __init__(self, slots: StreamSlots, key: str) -> None:
        self._slots, self._key = slots, key
        self._released = False

    def release(self) -> None:
        with self._slots.lock:
            if not self._released:
                self._released = True
                self._slots.open[self._key] -= 1
                if self._slots.open[self._key] <= 0:
                    del self._slots.open[self._key]


class StreamSlots:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: Counter[str] = Counter()

    def take(self, key: str, limit: int, process_limit: int) -> Slot:
        with self.lock:
            if self.open[key] >= limit:
                raise ApiError(429, "too_many_streams",
                               f"this token already has {limit} event streams open; close one "
                               "(or resume it by cursor) and retry",
                               {"limit": limit}, headers={"Retry-After": RETRY_AFTER})
            if sum(self.open.values()) >= process_limit:
                # However many tokens ask: a few of them must not take every thread.
                raise ApiError(503, "streams_full",
                               f"this server has {process_limit} event streams open, its most; "
                               "retry shortly", {"limit": process_limit},
                               headers={"Retry-After": RETRY_AFTER})
            self.open[key] += 1
        return Slot(self, key)


slots = StreamSlots()


def take_slot() -> Slot:
    """A slot for the caller's credential (set by app.http.auth), or the 429 that refuses one."""
    settings = get_settings()
    return slots.take(g.token_digest, settings.streams_per_token, settings.streams_per_process)
