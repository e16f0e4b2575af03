"""Streams replay what a client lacks, in bounded pages; chat and events page newest first.

Issue 9, items 5 and 7. Before the fix a stream's whole matching history was read
in one query into a list, `?cursor=` beat `Last-Event-ID` (so an EventSource that
reconnected to `?cursor=0` got everything again), a stream could not open at a
recent window, and the chat answered its oldest 500 messages only.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.http import pgpool
from app.streams.hub import EventHub, Subscription
from app.streams.sse import STARTED, event_stream
from app.web import create_app
from tasks.engine import pg
from tasks.settings import get_settings
from tests.integration.jobdb import tuples
from tests.integration.test_api_contract import Caller, _caller

PAGE = 500  # the replay's page size (app.streams.event_log.REPLAY_PAGE)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[EventHub]:
    """A hub of this test's own: the process-wide one keeps a cursor from earlier tests,
    whose identities were restarted since."""
    monkeypatch.setenv("SWITCHYARD_SSE_KEEPALIVE_SECONDS", "0.2")
    get_settings.cache_clear()
    h = EventHub()
    monkeypatch.setattr("app.streams.sse.hub", h)
    yield h
    h.stop()
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
def client(db: None) -> Iterator[FlaskClient]:
    app = create_app()
    app.config["TESTING"] = True
    with app.test_client() as c:
        yield c


@pytest.fixture
def alice(client: FlaskClient) -> Caller:
    return _caller(client, "alice")


def add_events(project: str, n: int, type_: str = "log") -> list[int]:
    rows = tuples("INSERT INTO agent_job_events (project_id, type, message, data) "
                  "SELECT %s, %s, 'event ' || i, jsonb_build_object('i', i) "
                  "FROM generate_series(1, %s) AS i RETURNING id", (project, type_, n))
    return sorted(r[0] for r in rows)


def stored(project: str) -> list[int]:
    return [r[0] for r in tuples("SELECT id FROM agent_job_events WHERE project_id = %s "
                                 "ORDER BY id", (project,))]


def read_sse(caller: Caller, url: str, headers: dict[str, str] | None = None) -> list[int]:
    """The ids a stream sends until it falls idle (its first keep-alive after the replay)."""
    response = caller.client.get(url, headers=caller.headers(headers), buffered=False)
    assert response.status_code == 200, response.get_data(True)
    ids = []
    try:
        for chunk in response.response:
            text = chunk.decode() if isinstance(chunk, bytes) else chunk
            if text.startswith(": keep-alive"):
                break
            name, data = _frame(text)
            if data is not None and name != "replayed":
                ids.append(data["id"])
    finally:
        response.close()
    return ids


def _frame(text: str) -> tuple[str | None, Any]:
    """An SSE frame's `event:` name and its `data:` JSON (None, None for a comment)."""
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line
                  and not line.startswith(":"))
    data = fields.get("data")
    return fields.get("event"), (json.loads(data) if data is not None else None)


# --- item 5: Last-Event-ID, bounded replay, a recent window, older pages ------------------------

def test_a_reconnect_with_last_event_id_gets_only_newer_events_even_with_cursor_0(
        alice: Caller, hub: EventHub) -> None:
    # Given a project with 30 events, and a browser that opened `?cursor=0` and saw 20 of them
    ids = add_events(alice.project, 30)
    url = f"/api/projects/{alice.project}/events?cursor=0"
    # When it reconnects, as an EventSource does: same URL, Last-Event-ID of the last it saw
    got = read_sse(alice, url, headers={"Last-Event-ID": str(ids[19])})
    # Then it gets the ten it lacks, not the project's whole history again
    assert got == ids[20:]
    # and `?cursor=` alone still resumes; on a job's stream the header wins too
    assert read_sse(alice, f"/api/projects/{alice.project}/events?cursor={ids[25]}") == ids[26:]
    job = alice.job(run_after="2099-01-01T00:00:00+00:00")
    job_ids = [r[0] for r in tuples("INSERT INTO agent_job_events (job_id, project_id, type, "
                                    "message, data) SELECT %s, %s, 'log', 'n', '{}' FROM "
                                    "generate_series(1, 4) RETURNING id", (job, alice.project))]
    assert read_sse(alice, f"/api/jobs/{job}/events?cursor=0",
                    headers={"Last-Event-ID": str(job_ids[1])}) == job_ids[2:]


def test_replay_reads_the_history_in_bounded_pages_and_hands_over_to_live(
        project: str, hub: EventHub, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a history of many more events than one page
    history = add_events(project, 2 * PAGE + 234)
    reads: list[tuple[str, int]] = []
    real_fetch = pgpool.fetch_dicts

    def counting_fetch(sql: str, params: Any = None) -> list[Any]:
        rows = real_fetch(sql, params)
        if "agent_job_events" in sql:
            reads.append((sql, len(rows)))
        return rows

    monkeypatch.setattr(pgpool, "fetch_dicts", counting_fetch)
    stream = event_stream(Subscription(project_id=uuid.UUID(project)), 0)

    # When a client starts reading: the first event costs one page, not the history (read
    # before the answer's status line: a stream that cannot start is a 503, not a broken 200)
    assert next(stream) is STARTED
    first = next(stream)
    assert first is not None and first.id == history[0]
    assert sum(n for _, n in reads) <= PAGE, reads

    # and live events are written while it is halfway through the replay
    got = [first.id] + [e.id for e in _take(stream, PAGE)]
    live = add_events(project, 5)
    while len(got) < len(history) + len(live):
        e = next(stream)
        if e is not None:
            got.append(e.id)
    stream.close()

    # Then it got the whole log, in order, once: no gap at the hand-off, no duplicate
    assert got == history + live == stored(project)
    # and no read of the log returned more than a page, each one bounded by a LIMIT
    assert reads and all(n <= PAGE and "LIMIT" in sql.upper() for sql, n in reads), \
        [(sql.split("WHERE")[-1], n) for sql, n in reads]
    assert len(reads) >= 3


def _take(stream: Iterator[Any], n: int) -> list[Any]:
    out = []
    while len(out) < n:
        e = next(stream)
        if e is not None:
            out.append(e)
    return out


def test_tail_opens_a_stream_n_events_back(alice: Caller, hub: EventHub) -> None:
    ids = add_events(alice.project, 120)
    base = f"/api/projects/{alice.project}/events"
    assert read_sse(alice, f"{base}?tail=50") == ids[-50:]
    assert read_sse(alice, f"{base}?tail=0") == []
    assert read_sse(alice, f"{base}?tail=500") == ids  # fewer stored than asked: all of them
    # A reconnect of a tail stream resumes from its Last-Event-ID, not from the window again.
    assert read_sse(alice, f"{base}?tail=50", headers={"Last-Event-ID": str(ids[-3])}) == ids[-2:]
    for bad in ("-1", "x", "100000"):
        response = alice.get(f"{base}?tail={bad}")
        assert response.status_code == 400, response.get_data(True)
        assert response.get_json()["error"]["details"]["field"] == "tail"
    response = alice.get(f"{base}?tail=5&cursor=3")
    assert response.status_code == 400
    assert "tail" in response.get_json()["error"]["message"]


def test_older_events_page_newest_first_back_to_the_first(alice: Caller) -> None:
    ids = add_events(alice.project, 130)
    other = add_events(alice.project, 20, "delta")
    url = f"/api/projects/{alice.project}/events/history"
    seen: list[int] = []
    before = ""
    pages = 0
    while True:
        response = alice.get(f"{url}?limit=50&types=log,status{before}")
        assert response.status_code == 200, response.get_data(True)
        body = response.get_json()
        assert [e["type"] for e in body["items"]] == ["log"] * len(body["items"])
        seen += [e["id"] for e in body["items"]]
        pages += 1
        if body["next"] is None:
            break
        before = f"&before={body['next']}"
    assert seen == ids[::-1] and pages == 3
    everything = alice.get(f"{url}?limit=500").get_json()
    assert [e["id"] for e in everything["items"]] == sorted(ids + other, reverse=True)
    assert everything["next"] is None
    # Just before the oldest a live stream opened at: the window's predecessors.
    window = alice.get(f"{url}?before={ids[100]}&limit=3").get_json()["items"]
    assert [e["id"] for e in window] == [ids[99], ids[98], ids[97]]
    assert set(window[0]) == {"id", "job_id", "project_id", "type", "message", "data",
                              "created_at"}
    assert alice.get(f"{url}?limit=0").status_code == 422
    assert alice.get(f"{url}?before=x").status_code == 422


def test_a_jobs_older_events_and_another_owners_are_not_found(alice: Caller, client) -> None:
    job = alice.job(run_after="2099-01-01T00:00:00+00:00")
    pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
               "SELECT %s, %s, 'log', 'n', '{}' FROM generate_series(1, 7)", (job, alice.project))
    add_events(alice.project, 3)  # the project's, not the job's
    body = alice.get(f"/api/jobs/{job}/events/history?limit=5").get_json()
    assert len(body["items"]) == 5 and body["next"] is not None
    rest = alice.get(f"/api/jobs/{job}/events/history?before={body['next']}").get_json()
    assert len(rest["items"]) == 3 and rest["next"] is None  # 7 logs and its 'queued' status
    bob = _caller(client, "bob")
    assert bob.get(f"/api/jobs/{job}/events/history").status_code == 404
    assert bob.get(f"/api/projects/{alice.project}/events/history").status_code == 404


# --- issue 22: the server marks where a replay ends -------------------------------------------

def read_frames(caller: Caller, url: str, until: Callable[[list[tuple[str, Any]]], bool],
                during: Callable[[list[tuple[str, Any]]], None] = lambda frames: None,
                seconds: float = 10) -> list[tuple[str, Any]]:
    """(event name, data) of every frame a stream sends, with `("id", n)` for an event's id
    line, until `until(frames)` or the stream ends; `during(frames)` runs at each frame."""
    response = caller.client.get(url, headers=caller.headers(), buffered=False)
    assert response.status_code == 200, response.get_data(True)
    frames: list[tuple[str, Any]] = []
    deadline = time.monotonic() + seconds
    try:
        for chunk in response.response:
            text = chunk.decode() if isinstance(chunk, bytes) else chunk
            if not text.startswith(":"):
                id_lines = [line[4:] for line in text.splitlines() if line.startswith("id: ")]
                name, data = _frame(text)
                frames.append((name or "message", data))
                if id_lines:
                    assert [data["id"]] == [int(i) for i in id_lines]
                else:
                    assert name == "replayed", f"an event with no id: line: {text!r}"
            during(frames)
            if until(frames) or time.monotonic() > deadline:
                break
    finally:
        response.close()
    return frames


def test_a_stream_marks_the_end_of_its_replay_once_before_live_events(
        alice: Caller, hub: EventHub) -> None:
    # Given a project with stored events, and a stream opened ten events back
    ids = add_events(alice.project, 30)
    url = f"/api/projects/{alice.project}/events?tail=10"
    live: list[int] = []

    def write_live_after_marker(frames: list[tuple[str, Any]]) -> None:
        if frames and frames[-1][0] == "replayed" and not live:
            live.extend(add_events(alice.project, 3))

    # When it reads the replay, and events are written once the marker came
    frames = read_frames(alice, url, until=lambda f: len(f) >= 10 + 1 + 3,
                         during=write_live_after_marker)
    names = [name for name, _ in frames]
    # Then the marker comes exactly once: after the ten replayed, before the three live ones
    assert names.count("replayed") == 1, names
    assert [d["id"] for n, d in frames[:10]] == ids[-10:]
    assert frames[10] == ("replayed", {"cursor": ids[-1]})
    assert [d["id"] for n, d in frames[11:]] == live
    # (the replayed and live events keep their shape: `event: <type>`, an id, the event JSON)
    assert {n for n, _ in frames[:10] + frames[11:]} == {"log"}
    assert set(frames[0][1]) == {"id", "job_id", "project_id", "type", "message", "data",
                                 "created_at"}


def test_an_empty_replay_is_marked_too_and_a_resume_says_where_it_starts(
        alice: Caller, hub: EventHub) -> None:
    ids = add_events(alice.project, 5)
    base = f"/api/projects/{alice.project}/events"
    first = lambda frames: bool(frames)  # noqa: E731
    assert read_frames(alice, f"{base}?tail=0", until=first) == [("replayed", {"cursor": ids[-1]})]
    assert read_frames(alice, f"{base}?cursor={ids[-1]}", until=first) == \
        [("replayed", {"cursor": ids[-1]})]


def test_an_ended_jobs_stream_replays_marks_and_ends(alice: Caller, hub: EventHub) -> None:
    # Given a job that has ended, with its events stored
    job = alice.job(run_after="2099-01-01T00:00:00+00:00")
    pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
               "SELECT %s, %s, 'log', 'n', '{}' FROM generate_series(1, 3)", (job, alice.project))
    pg.execute("UPDATE agent_jobs SET status = 'canceled' WHERE id = %s", (job,))
    pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
               "VALUES (%s, %s, 'status', 'canceled', '{\"status\": \"canceled\"}')",
               (job, alice.project))
    # When its stream is read to the end: every event, then the marker, once, then the end
    frames = read_frames(alice, f"/api/jobs/{job}/events", until=lambda f: False)
    names = [n for n, _ in frames]
    assert names[-1] == "replayed" and names.count("replayed") == 1, names
    assert names[-2] == "status" and frames[-1][1] == {"cursor": frames[-2][1]["id"]}


# --- item 7: the chat pages newest first -------------------------------------------------------

def test_chat_shows_the_newest_messages_and_pages_back_to_the_oldest(alice: Caller) -> None:
    # Given more messages than the old cap of 500, a second apart
    rows = tuples("INSERT INTO chat_messages (id, project_id, role, content, created_at) "
                  "SELECT gen_random_uuid(), %s, CASE WHEN i %% 2 = 0 THEN 'assistant' "
                  "ELSE 'user' END, 'message ' || i, "
                  "now() - interval '1 day' + i * interval '1 second' "
                  "FROM generate_series(1, 1234) AS i RETURNING id, content",
                  (alice.project,))
    by_age = [str(r[0]) for r in sorted(rows, key=lambda r: int(r[1].split()[1]))]
    url = f"/api/projects/{alice.project}/chat"

    # When the pane loads: the newest messages first
    first = alice.get(url).get_json()
    assert first["items"][0]["content"] == "message 1234"
    assert [m["id"] for m in first["items"]] == by_age[::-1][:len(first["items"])]

    # And paging back walks to the oldest, with no gap and no duplicate
    seen = []
    before = ""
    while True:
        body = alice.get(f"{url}?limit=200{before}").get_json()
        seen += [m["id"] for m in body["items"]]
        if body["next"] is None:
            break
        before = f"&before={body['next']}"
    assert seen == by_age[::-1]

    # And a message posted now is on the first page
    posted = alice.post(url, {"message": "newest"}).get_json()["message_id"]
    assert alice.get(f"{url}?limit=1").get_json()["items"][0]["id"] == posted
    assert alice.get(f"{url}?limit=0").status_code == 422
    assert alice.get(f"{url}?before=nonsense").status_code == 400


def test_a_type_filter_looks_through_a_bounded_window_per_page(alice: Caller,
                                                               monkeypatch) -> None:
    """A type that is rare (or never occurs) must not walk the whole history per request:
    each page looks through TYPE_SCAN events at most and says where to go on (review)."""
    from app.streams import event_log

    monkeypatch.setattr(event_log, "TYPE_SCAN", 40)
    rare = add_events(alice.project, 3, "artifact")
    add_events(alice.project, 100)  # newer, of another type
    url = f"/api/projects/{alice.project}/events/history?limit=10&types=artifact"
    found: list[int] = []
    pages, before = 0, ""
    while True:
        body = alice.get(url + before).get_json()
        found += [e["id"] for e in body["items"]]
        pages += 1
        if body["next"] is None:
            break
        before = f"&before={body['next']}"
    assert found == rare[::-1]
    assert pages == 3  # 40 + 40 newer events looked through, then the rest
    assert alice.get(url.replace("artifact", "never")).get_json()["next"] is not None


def test_a_stream_that_cannot_start_is_a_503_not_a_broken_200(alice: Caller, hub: EventHub,
                                                                 monkeypatch) -> None:
    # Given a database that fails the replay's first read (it went away)
    import psycopg

    from app.streams import event_log

    def away(*_: Any, **__: Any) -> Iterator[Any]:
        raise psycopg.OperationalError("server closed the connection unexpectedly")
        yield  # a generator, as the real replay is

    monkeypatch.setattr(event_log, "replay", away)
    # When a client opens a project's stream
    response = alice.client.get(f"/api/projects/{alice.project}/events",
                                headers=alice.headers())
    # Then the answer says so before any stream starts, and its slot is free again
    assert response.status_code == 503, response.status_code
    assert response.json["error"]["code"] == "database_unavailable"
    assert response.headers["Retry-After"]
    assert hub.subscribers == 0


def test_a_cursor_past_the_newest_event_gets_the_live_events(
        project: str, hub: EventHub) -> None:
    # A client whose Last-Event-ID is ahead of this log (a database restored from a backup,
    # a cursor typed by hand) was answered "replayed" and then nothing, ever: every live
    # event was at or before its cursor. It now starts at the newest event.
    add_events(project, 3)
    stream = event_stream(Subscription(project_id=uuid.UUID(project)), 99_999_999)
    assert next(stream) is STARTED
    live = add_events(project, 2)
    got: list[int] = []
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        e = next(stream)  # a keep-alive (None) at least every 0.2 s
        if e is not None:
            got.append(e.id)
    stream.close()
    assert got == live
