"""Server-Sent Events: replay from a cursor, then live events from the hub, with keep-alives.

A stream lasts at most SWITCHYARD_STREAM_MAX_SECONDS, then ends; the client
resumes it by cursor (an EventSource does so by itself, with Last-Event-ID).
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator

from flask import Response, request

from app.errors import ApiError
from app.hub import Event, Subscription, history, hub
from app.stream_slots import Slot
from tasks.settings import get_settings


def cursor_from_request() -> int:
    raw = request.args.get("cursor") or request.headers.get("Last-Event-ID") or "0"
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "invalid_cursor", "cursor must be an event id (an integer)",
                       {"field": "cursor"}) from None
    if value < 0:
        raise ApiError(400, "invalid_cursor", "cursor must be >= 0", {"field": "cursor"})
    return value


def format_event(e: Event) -> str:
    # A late event (committed after later ids were sent) has no `id:` line: the
    # client's Last-Event-ID must never move backwards, or a reconnect would
    # replay what it already has. Its id is in the data.
    head = "" if e.late else f"id: {e.id}\n"
    return f"{head}event: {e.type}\ndata: {json.dumps(e.as_json())}\n\n"


ALL_STORED = 2**63 - 1  # no upper bound on the replay


def event_stream(sub: Subscription, cursor: int,
                 is_last: Callable[[Event], bool] = lambda e: False,
                 *, ended: bool = False) -> Iterator[Event | None]:
    """Events after `cursor` with no gap and no duplicate; None marks a keep-alive.

    `ended`: the stream's subject (a job) had already ended when the stream
    opened, so every event it will have is stored: replay those after the cursor
    and stop, even when the last one is at or before the cursor (an EventSource
    reconnects with the id of the last event it got, and must not hang there).
    """
    settings = get_settings()
    keepalive = settings.sse_keepalive_seconds  # SWITCHYARD_SSE_KEEPALIVE_SECONDS
    deadline = time.monotonic() + settings.stream_max_seconds
    upto = hub.subscribe(sub)
    try:
        last = cursor
        replayed_late: set[int] = set()  # awaited by the hub yet already in the replay
        for e in history(sub, cursor, ALL_STORED if ended else upto):
            yield e
            last = e.id
            if e.id in sub.late_before:
                replayed_late.add(e.id)
            if is_last(e):
                return
        while not ended and not sub.dropped:
            left = deadline - time.monotonic()
            if left <= 0:
                return  # the stream's lifetime is over: the client resumes by cursor
            try:
                e = sub.events.get(timeout=min(keepalive, left))
            except queue.Empty:
                yield None
                continue
            if e.late:
                if e.id <= cursor or e.id in replayed_late:
                    continue
            elif e.id <= last:
                continue
            else:
                last = e.id
            yield e
            if is_last(e):
                return
    finally:
        hub.unsubscribe(sub)


def sse_response(events: Iterator[Event | None], slot: Slot) -> Response:
    """The stream as a response; `slot` (app.stream_slots) is given back when it closes,
    even when the body was never read."""
    def body() -> Iterator[str]:
        yield ": connected\n\n"
        for e in events:
            yield ": keep-alive\n\n" if e is None else format_event(e)

    response = Response(body(), mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.call_on_close(slot.release)
    return response
