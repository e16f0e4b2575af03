"""An event committed long after later ids were delivered still reaches every open stream.

Identity ids are taken at insert, visibility comes at commit: a transaction held
open past the hub's gap timeout commits an id below the hub's cursor. Before
the fix the hub moved past the gap and never looked back, so a job stream could
wait forever for a terminal event that was stored all along.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from app.streams import hub as hub_module
from app.streams.hub import EventHub, Subscription
from app.streams.sse import STARTED, event_stream, format_event
from tasks.engine import pg

pytestmark = pytest.mark.usefixtures("db")


def _insert(conn, project: str, job: str | None, type_: str) -> int:
    row = conn.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
                       "VALUES (%s, %s, %s, %s, '{}') RETURNING id",
                       (job, project, type_, type_)).fetchone()
    return int(row[0])


def _open_transaction():
    conn = pg.connect()
    conn.autocommit = False
    return conn


def _drain(q: queue.Queue, until: float) -> list:
    got = []
    while time.monotonic() < until:
        try:
            got.append(q.get(timeout=0.05))
        except queue.Empty:
            if got:
                break
    return got


@pytest.fixture
def fast_gap(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(hub_module, "GAP_TIMEOUT", 0.3)
    return 0.3


@pytest.fixture
def hub() -> Iterator[EventHub]:
    h = EventHub()
    yield h
    h.stop()


def test_late_commit_below_the_cursor_reaches_live_subscribers(project: str, fast_gap: float,
                                                               hub: EventHub) -> None:
    sub = Subscription(project_id=uuid.UUID(project))
    hub.subscribe(sub)

    late = _open_transaction()
    try:
        held = _insert(late, project, None, "held")          # id N, not yet visible
        with pg.connect() as other:
            after = _insert(other, project, None, "after")   # id N+1, committed now
        assert after > held
        # The hub waits out the gap, then delivers N+1 ...
        first = _drain(sub.events, time.monotonic() + fast_gap + 5)
        assert [e.id for e in first] == [after]
        time.sleep(fast_gap * 3)  # ... and is long past the gap when N commits
        late.commit()
    finally:
        late.close()

    got = _drain(sub.events, time.monotonic() + 5)
    assert [e.id for e in got] == [held], "the late event never reached the subscriber"
    assert got[0].late


def test_job_stream_ends_on_a_late_terminal_event(project: str, fast_gap: float, hub: EventHub,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the SSE generator: history, live, the late one once, and no `id:` that
    would move the client's Last-Event-ID backwards."""
    monkeypatch.setattr("app.streams.sse.hub", hub)
    job = str(uuid.uuid4())
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, status, payload, "
               "idempotency_key) "
               "VALUES (%s, %s, 'system.canary', 'running', '{}', %s)", (job, project, job))
    with pg.connect() as conn:
        before = _insert(conn, project, job, "log")

    out: list = []
    stream = event_stream(Subscription(job_id=uuid.UUID(job)), 0,
                          is_last=lambda e: e.type == "terminal")
    reader = threading.Thread(target=lambda: out.extend(
        e for e in stream if e is not None and e is not STARTED),
                              daemon=True)
    reader.start()
    time.sleep(0.5)

    late = _open_transaction()
    try:
        terminal = _insert(late, project, job, "terminal")
        with pg.connect() as conn:
            after = _insert(conn, project, job, "log")
        time.sleep(fast_gap * 4)
        late.commit()
    finally:
        late.close()

    reader.join(10)
    assert not reader.is_alive(), "the job stream still waits for its terminal event"
    assert [e.id for e in out] == [before, after, terminal]
    assert format_event(out[-1]).startswith("event: terminal\n"), "a late event carries no id:"
    assert format_event(out[1]).startswith(f"id: {after}\n")


def test_an_id_that_never_commits_is_forgotten(project: str, fast_gap: float, hub: EventHub,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A rolled-back insert leaves a gap forever: it is remembered for a bounded time only."""
    monkeypatch.setattr(hub_module, "LATE_WINDOW", 1.0)
    sub = Subscription(project_id=uuid.UUID(project))
    hub.subscribe(sub)
    rolled = _open_transaction()
    try:
        _insert(rolled, project, None, "never")
        with pg.connect() as conn:
            _insert(conn, project, None, "after")
        _drain(sub.events, time.monotonic() + 3)
        assert len(hub._late) == 1
        rolled.rollback()
    finally:
        rolled.close()
    with pg.connect() as conn:
        _insert(conn, project, None, "later")  # a poll after the window has passed
    time.sleep(1.5)
    with pg.connect() as conn:
        _insert(conn, project, None, "later")
    _drain(sub.events, time.monotonic() + 2)
    assert hub._late == {}
