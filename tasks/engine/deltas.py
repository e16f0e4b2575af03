"""Buffered LLM deltas: streamed text leaves as `delta` events every ~250 ms or ~500 chars."""

from __future__ import annotations

import time
from collections.abc import Callable


class DeltaBuffer:
    def __init__(self, flush: Callable[[str], None], *, interval: float = 0.25,
                 max_chars: int = 500, clock: Callable[[], float] = time.monotonic):
        self._flush, self._interval, self._max, self._clock = flush, interval, max_chars, clock
        self._parts: list[str] = []
        self._size = 0
        self._since = clock()

    def add(self, text: str) -> None:
        if not text:
            return
        self._parts.append(text)
        self._size += len(text)
        if self._size >= self._max or self._clock() - self._since >= self._interval:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            self._flush("".join(self._parts))
        self._parts, self._size, self._since = [], 0, self._clock()
