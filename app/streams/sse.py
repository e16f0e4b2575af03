"""Server-Sent Events: replay from a cursor, then live events from the hub, with keep-alives.

A stream lasts at most SWITCHYARD_STREAM_MAX_SECONDS, then ends; the client
resumes it by cursor (an EventSource does so by itself, with Last-Event-ID).
"""

from __future__ import annotations

import itertools
import json
import queue
import socket
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from flask import Response, request

from app.http.errors import ApiError
from app.streams import event_log
from app.streams.hub import Event, Subscription, hub
from app.streams.stream_slots import Slot
from tasks.settings import get_settings


def stream_cursor(sub: Subscription) -> int:
    """Where a stream starts. `Last-Event-ID` wins: it is what a reconnecting EventSource
    already has, whatever its URL says. Then `?cursor=<event id>`; then `?tail=N`, the last
    N stored events; else 0, the whole history."""
    header = request.headers.get("Last-Event-ID", "").strip()
    if header:
        return _event_id(header, "Last-Event-ID")
    cursor, tail = request.args.get("cursor") or None, request.args.get("tail")
    if tail is None:
        return _event_id(cursor or "0", "cursor")
    if cursor is not None:
        raise ApiError(400, "invalid_cursor", "give `cursor` or `tail`, not both",
                       {"field": "tail"})
    try:
        n = int(tail)
    except ValueError:
        n = -1
    if not 0 <= n <= event_log.MAX_TAIL:
        raise ApiError(400, "invalid_cursor", f"tail must be a whole number of events from 0 "
                       f"to {event_log.MAX_TAIL}", {"field": "tail"})
    return event_log.tail_cursor(sub, n)


def _event_id(raw: str, field: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "invalid_cursor", f"{field} must be an event id (an integer)",
                       {"field": field}) from None
    if value < 0:
        raise ApiError(400, "invalid_cursor", f"{field} must be >= 0", {"field": field})
    return value


def format_event(e: Event) -> str:
    # A late event (committed after later ids were sent) has no `id:` line: the
    # client's Last-Event-ID must never move backwards, or a reconnect would
    # replay what it already has. Its id is in the data.
    head = "" if e.late else f"id: {e.id}\n"
    return f"{head}event: {e.type}\ndata: {json.dumps(e.as_json())}\n\n"


ALL_STORED = 2**63 - 1  # no upper bound on the replay


@dataclass(frozen=True)
class ReplayEnd:
    """Where a stream's replay of stored events ends: what follows is live. `cursor` is the
    id of the last event replayed (the stream's starting cursor when none was)."""
    cursor: int


class Started:
    """The first item of every stream: it is subscribed and its first page of stored events
    is read. A response reads it before its status line, so a stream that cannot start
    (the hub not ready, the database away) is answered 503, not a 200 that breaks."""


STARTED = Started()


def format_replay_end(marker: ReplayEnd) -> str:
    # No `id:` line: the marker is no event of the log, and a client's Last-Event-ID stays.
    return f"event: replayed\ndata: {json.dumps({'cursor': marker.cursor})}\n\n"


# How often an idle stream looks whether its client is still there. Without a look it
# learns only when a keep-alive write fails, and holds its slot (its token's and the
# process's) until then.
PROBE_SECONDS = 1.0


def client_gone(environ: dict[str, Any]) -> Callable[[], bool]:
    """Whether the client of this request closed its connection: the socket gunicorn hands
    the application reads as at its end (a peek that waits for nothing and consumes
    nothing). Unknown (another server, TLS in the process) reads as still there. A client
    that only shut its sending side reads as gone too: an EventSource never does."""
    sock = environ.get("gunicorn.socket")
    if sock is None:
        return lambda: False

    def gone() -> bool:
        try:
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError, ValueError):
            return False  # nothing to read now, or a TLS socket (no peeking)
        except OSError:
            return True  # reset by the peer, or closed

    return gone


def event_stream(sub: Subscription, cursor: int,
                 is_last: Callable[[Event], bool] = lambda e: False,
                 *, ended: bool = False,
                 mark_replay: bool = False,
                 gone: Callable[[], bool] = lambda: False,
                 ) -> Generator[Event | ReplayEnd | Started | None, None, None]:
    """Events after `cursor` with no gap and no duplicate; None marks a keep-alive.

    `mark_replay`: once the stored events are replayed, yield one ReplayEnd, before any
    live event (also when the replay was empty, or ended the stream: its last event was
    `is_last`). A replay cut short (a dropped subscription) has none: the stream ends.

    `ended`: the stream's subject (a job) had already ended when the stream
    opened, so every event it will have is stored: replay those after the cursor
    and stop, even when the last one is at or before the cursor (an EventSource
    reconnects with the id of the last event it got, and must not hang there).
    """
    settings = get_settings()
    keepalive = settings.sse_keepalive_seconds  # SWITCHYARD_SSE_KEEPALIVE_SECONDS
    deadline = time.monotonic() + settings.stream_max_seconds
    upto = hub.subscribe(sub)
    if cursor > upto:
        # Past every event the hub has seen, and perhaps past every one stored (a database
        # restored from a backup, a cursor made up), it would drop each live event as sent
        # already: start at the newest stored event then.
        cursor = min(cursor, max(upto, event_log.newest()))
    try:
        last = cursor
        replayed_late: set[int] = set()  # awaited by the hub yet already in the replay
        # In pages straight from the database; live events queue up meanwhile (a replay
        # longer than the queue drops the subscription: the stream ends, the client resumes).
        replay = event_log.replay(sub, cursor, ALL_STORED if ended else upto)
        first = list(itertools.islice(replay, 1))  # the first page, read before STARTED
        yield STARTED
        for e in itertools.chain(first, replay):
            if sub.dropped:
                return
            yield e
            last = e.id
            if e.id in sub.late_before:
                replayed_late.add(e.id)
            if is_last(e):
                if mark_replay:
                    yield ReplayEnd(last)
                return
        if mark_replay and not sub.dropped:
            yield ReplayEnd(last)
        quiet_until = time.monotonic() + keepalive
        while not ended and not sub.dropped:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return  # the stream's lifetime is over: the client resumes by cursor
            try:
                e = sub.events.get(timeout=max(0.0, min(PROBE_SECONDS, quiet_until - now, left)))
            except queue.Empty:
                if gone():
                    return  # the client left: its slot goes back now, not at a keep-alive
                if time.monotonic() >= quiet_until:
                    quiet_until = time.monotonic() + keepalive
                    yield None
                continue
            if e is None or sub.dropped:
                return  # the hub closed the stream (the process is stopping)
            if e.late:
                if e.id <= cursor or e.id in replayed_late:
                    continue
            elif e.id <= last:
                continue
            else:
                last = e.id
            # Only what the client is sent counts as traffic: events dropped above (already
            # replayed) must not put the keep-alive off (API.md: one at least every 15 s).
            quiet_until = time.monotonic() + keepalive
            yield e
            if is_last(e):
                return
    finally:
        hub.unsubscribe(sub)


def sse_response(events: Generator[Event | ReplayEnd | Started | None, None, None],
                 slot: Slot) -> Response:
    """The stream as a response; `slot` (app.streams.stream_slots) is given back when it closes,
    even when the body was never read. A ReplayEnd is the `replayed` event."""
    try:
        started = next(events)  # subscribed and the first page read, or the error's answer
    except BaseException:
        slot.release()
        raise
    assert started is STARTED

    def body() -> Iterator[str]:
        yield ": connected\n\n"
        for e in events:
            assert not isinstance(e, Started)
            yield (": keep-alive\n\n" if e is None else format_replay_end(e)
                   if isinstance(e, ReplayEnd) else format_event(e))

    response = Response(body(), mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.call_on_close(slot.release)
    response.call_on_close(events.close)  # unsubscribed even when the body was never read
    return response
