"""Streams are capped per token and per process: four tokens cannot take every thread."""

from __future__ import annotations

import pytest

from app.http.errors import ApiError
from app.streams.stream_slots import StreamSlots


def test_tokens_together_stop_at_the_process_cap_and_a_release_makes_room() -> None:
    slots = StreamSlots()
    held = [slots.take(f"token-{t}", 20, 48) for t in "abc" for _ in range(16)]  # 48 in all
    with pytest.raises(ApiError) as full:
        slots.take("token-d", 20, 48)
    assert (full.value.status, full.value.code) == (503, "streams_full")
    assert full.value.headers["Retry-After"]
    held.pop().release()
    slots.take("token-d", 20, 48)  # room again
    with pytest.raises(ApiError) as own:
        for _ in range(20):
            slots.take("token-e", 20, 100)
        slots.take("token-e", 20, 100)
    assert own.value.code == "too_many_streams"
