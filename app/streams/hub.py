"""One event listener per web process, fanning new events out to every stream subscriber.

A single thread watches the events' id sequence (a one-page read, every POLL_BUSY
while anyone subscribes), reads `agent_job_events` past its cursor when the sequence
has moved and hands each row to the subscribers whose filter matches: one database
reader per process, never one connection or one polling loop per client. (It once
LISTENed for a NOTIFY per event-writing statement: every such commit then queued on
PostgreSQL's one notification lock, which took publish-to-start p99 under load from
2.5 ms to 560 ms. Migration 0019 drops the trigger.)

Identity ids are assigned before commit, so a later id can become visible
before an earlier one; the hub waits up to GAP_TIMEOUT for a gap to close, so
subscribers normally see events in id order. A gap still open then is either a
rolled-back insert or a transaction still running: the hub moves on but
remembers the missing ids (at most LATE_LIMIT of them, for LATE_WINDOW) and
looks for them again at every poll, publishing any that commit late as a `late`
event. So nothing committed is ever lost to a live subscriber, only delivered
out of order. A subscriber whose queue fills up (a client that stopped
reading) is dropped; it resumes from its cursor.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.api import responses
from app.http.errors import ApiError
from tasks.engine import pg

log = logging.getLogger(__name__)

# The last id the events' sequence handed out (committed or not): one buffer, no table.
HEAD = ("SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS head "
        "FROM agent_job_events_id_seq")
POLL_BUSY = 0.01  # how often the sequence is read while anyone subscribes ...
POLL_IDLE = 0.25  # ... and while nobody does
IDLE_RECHECK = 1.0
GAP_RECHECK = 0.05
GAP_TIMEOUT = 2.0
LATE_LIMIT = 10_000      # skipped ids remembered at most ...
LATE_WINDOW = 3600.0     # ... and for at most this long (a transaction open for an hour)
LATE_RECHECK = 0.5       # the skipped ids are looked up at most this often
QUEUE_LIMIT = 2000
BATCH = 1000
# At most about this many bytes of event data per read (one event may pass it alone; each
# is at most SWITCHYARD_EVENT_DATA_MAX_BYTES): a burst of big events from one tenant never
# makes a web process hold all of them at once.
BATCH_BYTES = 4 * 1024 * 1024

EVENT_COLUMNS = "id, job_id, project_id, type, message, data, created_at"
# The next events after a cursor, up to BATCH rows and about BATCH_BYTES of data (the first
# row always); `running` is the data read so far, up to and including the row.
POLL = f"""
SELECT {EVENT_COLUMNS}, running FROM (
    SELECT {EVENT_COLUMNS}, sum(octet_length(data::text)) OVER (ORDER BY id) AS running
    FROM agent_job_events WHERE id > %s ORDER BY id LIMIT {BATCH}
) e WHERE running - octet_length(data::text) < %s ORDER BY id
"""


@dataclass(frozen=True)
class Event:
    id: int
    job_id: uuid.UUID | None
    project_id: uuid.UUID
    type: str
    message: str
    data: dict[str, Any]
    created_at: datetime
    late: bool = False  # committed after the hub had moved past its id

    def as_json(self) -> dict[str, Any]:
        # Constructed, not validated: one odd stored row must not end every replay that
        # reaches it, and this runs once per event per subscriber.
        return responses.Event.model_construct(
            id=self.id, job_id=self.job_id, project_id=self.project_id, type=self.type,
            message=self.message, data=self.data, created_at=self.created_at).dump()


@dataclass(eq=False)
class Subscription:
    project_id: uuid.UUID | None = None
    job_id: uuid.UUID | None = None
    events: queue.Queue = field(default_factory=lambda: queue.Queue(QUEUE_LIMIT))
    dropped: bool = False
    # The ids the hub was still waiting for when this subscription began: the only
    # ones that can arrive late *and* be in the subscriber's replay as well.
    late_before: frozenset[int] = frozenset()

    def wants(self, e: Event) -> bool:
        if self.job_id is not None:
            return e.job_id == self.job_id
        return e.project_id == self.project_id


class EventHub:
    def __init__(self) -> None:
        self._subs: set[Subscription] = set()
        self._lock = threading.Lock()
        self._cursor: int | None = None
        self._gap_since: float | None = None
        self._late: dict[int, float] = {}  # skipped id -> when it was skipped (monotonic)
        self._late_checked = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()  # a new subscriber: read the sequence at once
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failing = False
        self._closing = False

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    def subscribe(self, sub: Subscription) -> int:
        """Register; returns the hub's cursor: events after it will arrive on `sub.events`."""
        self._ensure_running()
        with self._lock:
            if self._closing:
                raise ApiError(503, "unavailable", "the server is stopping; reconnect",
                               headers={"Retry-After": "1"})
            if self._cursor is None:
                # Without the hub's cursor the replay/live hand-off could skip events.
                raise ApiError(503, "unavailable", "the event stream is not ready yet; retry",
                               headers={"Retry-After": "1"})
            self._subs.add(sub)
            sub.late_before = frozenset(self._late)
            self._wake.set()
            return self._cursor

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.discard(sub)

    def close_streams(self) -> None:
        """The process is stopping: every open stream ends now (each client resumes from
        its cursor elsewhere or later), and no new one starts. A stream would otherwise hold
        the web process's graceful shutdown for its whole keep-alive, or until killed."""
        with self._lock:
            self._closing = True
            subs = list(self._subs)
        for s in subs:
            s.dropped = True
            with contextlib.suppress(queue.Full):
                s.events.put_nowait(None)  # wakes the stream waiting on its queue

    def _ensure_running(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="event-hub", daemon=True)
                self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        """End the reader thread; for tests and shutdown."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(IDLE_RECHECK * 3)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                # In a web process the connection is one of the pool's (app.http.pgpool),
                # held for the hub's life.
                if self._cursor is None:
                    self._cursor = int(pg.fetch_value(
                        "SELECT COALESCE(max(id), 0) AS cursor FROM agent_job_events"))
                self._ready.set()
                self._failing = False
                self._watch()
            except Exception:
                pg.reset()  # closed, and given back to the pool it came from
                # One traceback per outage, not one per second of it.
                log.warning("event hub lost its connection; reconnecting",
                            exc_info=not self._failing)
                self._failing = True
                time.sleep(1)
        pg.reset()

    def _watch(self) -> None:
        """Read the events whenever the sequence moved; while an id below the sequence's
        head is not visible yet (a gap, a transaction still open), read again at
        GAP_RECHECK, and at IDLE_RECHECK after the gap timeout."""
        polled_head, polled_at = -1, 0.0
        while not self._stop.is_set():
            head = int(pg.fetch_value(HEAD))
            now = time.monotonic()
            behind = head > (self._cursor or 0)
            if (head != polled_head or self._gap_since is not None
                    or (behind and now - polled_at >= IDLE_RECHECK)):
                polled_head, polled_at = head, now
                while self._poll() and not self._stop.is_set():
                    pass  # a full read: more may be waiting, read on before sleeping
            else:
                self._recheck_late()  # at most every LATE_RECHECK
            if self._gap_since is not None:
                wait = GAP_RECHECK
            else:
                wait = POLL_BUSY if self._subs else POLL_IDLE
            self._wake.wait(wait)
            self._wake.clear()

    def _poll(self) -> bool:
        """Publish what committed since the cursor; True when the read was full."""
        assert self._cursor is not None
        self._recheck_late()
        rows = pg.fetch_dicts(POLL, (self._cursor, BATCH_BYTES))
        read = rows[-1]["running"] if rows else 0
        for row in rows:
            del row["running"]
            e = Event(**row)
            skipped = range(self._cursor + 1, e.id)
            if skipped:
                if self._gap_since is None:
                    self._gap_since = time.monotonic()
                if time.monotonic() - self._gap_since < GAP_TIMEOUT:
                    return False  # an earlier id may still commit: wait for it
            self._gap_since = None
            self._publish(e, skipped)
        return len(rows) == BATCH or read >= BATCH_BYTES

    def _recheck_late(self) -> None:
        """Publish the skipped ids that have committed since; forget the oldest ones."""
        now = time.monotonic()
        if not self._late or now - self._late_checked < LATE_RECHECK:
            return
        self._late_checked = now
        with self._lock:
            for i in [i for i, t in self._late.items() if now - t > LATE_WINDOW]:
                del self._late[i]
            ids = list(self._late)
        if not ids:
            return
        rows = pg.fetch_dicts(f"SELECT {EVENT_COLUMNS} FROM agent_job_events "
                              "WHERE id = ANY(%s) ORDER BY id", (ids,))
        for row in rows:
            self._publish(Event(**row, late=True))

    def _publish(self, e: Event, skipped: range = range(0)) -> None:
        # Moving the cursor (and the set of ids still awaited) under the lock that
        # subscribe() takes means a new subscriber either gets `e` in its queue or
        # in its history, never neither, and knows which late ones it may see twice.
        with self._lock:
            subs = [s for s in self._subs if s.wants(e)]
            if e.late:
                self._late.pop(e.id, None)
            else:
                self._cursor = e.id
                now = time.monotonic()
                for i in skipped[-LATE_LIMIT:]:
                    self._late[i] = now
                while len(self._late) > LATE_LIMIT:  # forget the oldest first
                    del self._late[next(iter(self._late))]
        for s in subs:
            try:
                s.events.put_nowait(e)
            except queue.Full:
                s.dropped = True
                self.unsubscribe(s)


hub = EventHub()
