"""Live events through a real gunicorn web process: SSE and WebSocket, resume, fan-out, drops.

The web process runs as in production (gunicorn gthread, one worker process,
one event hub); jobs run on the in-process test worker, so the events travel
worker -> PostgreSQL -> NOTIFY -> the web process's hub -> each client. Every
check compares what a client received with the event log in PostgreSQL:
the same ids, in the same order, nothing missing and nothing twice.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import pytest
import simple_websocket

from app.http.db import session_factory
from app.http.tokens import create_token
from app.streams.hub import QUEUE_LIMIT
from models.db import session_scope
from tasks.engine import pg
from tests.e2e.procs import Proc, Procs, wait
from tests.integration.jobdb import tuple_row, tuples

pytestmark = pytest.mark.e2e

KEEPALIVE = 1.0  # SWITCHYARD_SSE_KEEPALIVE_SECONDS for the server: also how fast a listener stops
TIMEOUT = httpx.Timeout(10.0, read=KEEPALIVE * 8)
METRICS_TOKEN = "e2e-metrics-token-" + "0123456789" * 2  # the operator's (32+ chars)


# --- the web process --------------------------------------------------------------------------

@dataclass
class Web:
    base: str
    token: str
    project: str
    proc: Proc

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    def url(self, path: str) -> str:
        return self.base + path

    def job(self, payload: dict[str, Any] | None = None, **fields: Any) -> str:
        r = httpx.post(self.url(f"/api/projects/{self.project}/jobs"), headers=self.headers(),
                       json={"job_type": "system.canary", "payload": payload or {}, **fields},
                       timeout=10)
        assert r.status_code == 202, r.text
        return r.json()["job_id"]

    def subscribers(self) -> int:
        text = httpx.get(self.url("/metrics"), timeout=10,
                         headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
        match = re.search(r"^switchyard_stream_subscribers (\S+)$", text, re.M)
        assert match, text
        return int(float(match.group(1)))

    def wait_subscribers(self, n: int, timeout: float = 15) -> None:
        wait(lambda: self.subscribers() == n, timeout, f"{n} stream subscribers")


@pytest.fixture
def web(procs: Procs) -> Iterator[Web]:
    """A gunicorn web process (killed at teardown by `procs`), a token and a project."""
    proc, base = procs.web(threads=150,
                           env={"SWITCHYARD_SSE_KEEPALIVE_SECONDS": str(KEEPALIVE),
                                # one token plays a hundred clients here, on 150 threads
                                "SWITCHYARD_STREAMS_PER_TOKEN": "1000",
                                "SWITCHYARD_STREAMS_PER_PROCESS": "140",
                                "SWITCHYARD_METRICS_TOKEN": METRICS_TOKEN})
    token, project = tenant("alice", "streams")
    yield Web(base, token, project, proc)


def tenant(owner: str, project_name: str) -> tuple[str, str]:
    """A new owner's token and a project of theirs."""
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, owner)
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, %s)",
               (project, owner_id, project_name))
    return token, project


# --- the truth: the event log -----------------------------------------------------------------

def logged(*, project: str | None = None, job: str | None = None, after: int = 0) -> list[int]:
    column, value = ("job_id", job) if job else ("project_id", project)
    return [r[0] for r in tuples(f"SELECT id FROM agent_job_events WHERE {column} = %s "
                                 "AND id > %s ORDER BY id", (value, after))]


def job_status(job_id: str) -> str:
    row = tuple_row("SELECT status FROM agent_jobs WHERE id = %s", (job_id,))
    assert row is not None
    return row[0]


def wait_done(*job_ids: str, timeout: float = 30) -> None:
    wait(lambda: all(job_status(j) in {"completed", "failed", "canceled"} for j in job_ids),
         timeout, f"jobs {job_ids} to finish")


def is_end_of(job_id: str) -> Callable[[dict], bool]:
    def end(e: dict) -> bool:
        return (e["job_id"] == job_id and e["type"] == "status"
                and e["data"].get("status") in {"completed", "failed", "canceled"})
    return end


def after(n: int) -> Callable[[dict], bool]:
    """A stop condition: true on the n-th event."""
    seen = iter(range(1, n + 1))
    return lambda e: next(seen, n) >= n


# --- clients ----------------------------------------------------------------------------------

@dataclass(eq=False)
class Listener(threading.Thread):
    """One SSE (or WebSocket) client in a thread, recording what it receives and when."""

    web: Web
    path: str
    until: Callable[[dict], bool] = lambda e: False
    headers: dict[str, str] = field(default_factory=dict)
    websocket: bool = False
    events: list[dict] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    replayed: list[tuple[int, dict]] = field(default_factory=list)  # (events before it, data)
    status: int | None = None
    ended_by_server: bool = False
    error: BaseException | None = None
    connected: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True, name=f"listener {self.path}")

    @property
    def ids(self) -> list[int]:
        return [e["id"] for e in self.events]

    def run(self) -> None:
        try:
            self._websocket() if self.websocket else self._sse()
        except BaseException as exc:  # reported by finish()
            self.error = exc
        finally:
            self.connected.set()

    def _take(self, event: dict) -> bool:
        event["received_at"] = time.time()
        self.events.append(event)
        return self.until(event)

    def _sse(self) -> None:
        with httpx.Client(timeout=TIMEOUT) as client, client.stream(
                "GET", self.web.url(self.path), headers=self.web.headers(self.headers)) as r:
            self.status = r.status_code
            if r.status_code != 200:
                r.read()
                return
            fields: dict[str, str] = {}
            for line in r.iter_lines():
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                    self.connected.set()
                elif line:
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value
                elif fields.get("event") == "replayed":  # the replay's end: no event of the log
                    assert "id" not in fields, fields
                    self.replayed.append((len(self.events), json.loads(fields["data"])))
                    fields = {}
                elif fields:
                    event = json.loads(fields["data"])
                    assert fields["id"] == str(event["id"]), fields
                    assert fields["event"] == event["type"], fields
                    assert set(event) == {"id", "job_id", "project_id", "type", "message",
                                          "data", "created_at"}, event
                    fields = {}
                    if self._take(event):
                        return
                if self.stop.is_set():
                    return
            self.ended_by_server = True

    def _websocket(self) -> None:
        ws = simple_websocket.Client(self.web.url(self.path).replace("http://", "ws://"),
                                     headers=self.web.headers(self.headers))
        self.status = 101
        self.connected.set()
        try:
            while not self.stop.is_set():
                text = ws.receive(timeout=0.2)
                if text is not None and self._take(json.loads(text)):
                    return
        except simple_websocket.ConnectionClosed:
            self.ended_by_server = True
        finally:
            ws.close()

    def finish(self, timeout: float = 30) -> Listener:
        self.join(timeout)
        if self.is_alive():
            self.stop.set()
            self.join(KEEPALIVE * 3)
            raise AssertionError(f"{self.path} still open after {timeout}s: status "
                                 f"{self.status}, {len(self.events)} events, comments "
                                 f"{self.comments[:5]}")
        if self.error is not None:
            raise self.error
        return self


def listen(web: Web, path: str, **kw: Any) -> Listener:
    listener = Listener(web, path, **kw)
    listener.start()
    assert listener.connected.wait(15), f"{path} did not connect"
    if listener.error is not None:
        raise listener.error
    return listener


# --- tests ------------------------------------------------------------------------------------

def test_sse_and_websocket_clients_receive_live_events_in_order(web, worker):
    # Given a project SSE client and a WebSocket client, both subscribed
    project_path = f"/api/projects/{web.project}/events"
    sse = listen(web, project_path, until=lambda e: e["type"] == "status"
                 and e["data"]["status"] == "completed")
    ws = listen(web, f"/ws/projects/{web.project}", websocket=True,
                until=lambda e: e["type"] == "status" and e["data"]["status"] == "completed")
    web.wait_subscribers(2)

    # When a job runs
    job_id = web.job({"steps": 5, "step_seconds": 0.02})
    job_sse = listen(web, f"/api/jobs/{job_id}/events")
    wait_done(job_id)

    # Then each client got every event of the log, in order, once
    expected = logged(project=web.project)
    assert len(expected) >= 7, "queued, running, 5 steps at least, completed"
    assert sse.finish().ids == expected
    assert ws.finish().ids == expected
    assert job_sse.finish().ids == logged(job=job_id) == expected
    assert [e["type"] for e in sse.events] == [e["type"] for e in ws.events]
    assert [e["data"] for e in sse.events] == [e["data"] for e in ws.events]
    # and the job's stream was closed by the server after its terminal status event
    assert job_sse.ended_by_server
    assert job_sse.events[-1]["data"]["status"] == "completed"
    assert job_sse.comments[0] == "connected"
    # and the first two clients were live: they had every event within a second of its writing
    for e in sse.events:
        lag = e["received_at"] - datetime.fromisoformat(e["created_at"]).timestamp()
        assert lag < 1.5, f"event {e['id']} arrived {lag:.2f}s after it was written"


def test_resume_from_a_cursor_or_last_event_id_yields_exactly_the_missing_events(web, worker):
    # Given a slow job and a project client that leaves after 6 events
    job_id = web.job({"steps": 30, "step_seconds": 0.03})
    first = listen(web, f"/api/projects/{web.project}/events", until=after(6)).finish()
    assert job_status(job_id) != "completed", "the job must still be producing events"

    # When it comes back with Last-Event-ID, while the job is still running
    second = listen(web, f"/api/projects/{web.project}/events",
                    headers={"Last-Event-ID": str(first.ids[-1])}, until=is_end_of(job_id))
    # and a job client comes back with ?cursor= (replay plus live, then the end of the job)
    job_first = listen(web, f"/api/jobs/{job_id}/events", until=after(10)).finish()
    job_second = listen(web, f"/api/jobs/{job_id}/events?cursor={job_first.ids[-1]}")
    wait_done(job_id)

    # Then the two halves are the log: no gap, no duplicate
    expected = logged(project=web.project)
    assert first.ids + second.finish().ids == expected
    assert job_first.ids + job_second.finish().ids == expected
    assert job_second.ended_by_server

    # And after the fact, every way of resuming replays exactly what follows the cursor
    for k in (0, 1, len(expected) // 2, len(expected) - 1):
        cursor = expected[k]
        rest = expected[k + 1:]
        by_header = listen(web, f"/api/jobs/{job_id}/events",
                           headers={"Last-Event-ID": str(cursor)}).finish()
        assert by_header.ids == rest and by_header.ended_by_server
        if not rest:
            continue
        by_query = listen(web, f"/api/projects/{web.project}/events?cursor={cursor}",
                          until=lambda e, last=rest[-1]: e["id"] == last).finish()
        assert by_query.ids == rest
        by_ws = listen(web, f"/ws/projects/{web.project}?cursor={cursor}", websocket=True,
                       until=lambda e, last=rest[-1]: e["id"] == last).finish()
        assert by_ws.ids == rest
    # A cursor at the end replays nothing; and the header wins over the query string: an
    # EventSource reconnects to the URL it opened (here ?cursor=0) with its Last-Event-ID,
    # and must get only what it has not seen (it used to get the whole history again).
    tail = listen(web, f"/api/projects/{web.project}/events?cursor=0",
                  headers={"Last-Event-ID": str(expected[-1])})
    time.sleep(KEEPALIVE * 1.5)
    tail.stop.set()
    assert tail.finish().ids == []
    assert "keep-alive" in tail.comments
    # A stream opened at a recent window: the last 3 events, over SSE and WebSocket alike.
    for path, ws in ((f"/api/projects/{web.project}/events?tail=3", False),
                     (f"/ws/projects/{web.project}?tail=3", True)):
        window = listen(web, path, websocket=ws,
                        until=lambda e, last=expected[-1]: e["id"] == last).finish()
        assert window.ids == expected[-3:], path


def test_a_job_stream_ends_after_its_terminal_status_event(web, worker):
    # A queued job's stream stays open, then ends as soon as the job is canceled.
    waiting = web.job(run_after="2099-01-01T00:00:00+00:00")
    stream = listen(web, f"/api/jobs/{waiting}/events")
    web.wait_subscribers(1)
    time.sleep(KEEPALIVE * 1.5)
    assert stream.is_alive() and stream.ids == logged(job=waiting)
    r = httpx.post(web.url(f"/api/jobs/{waiting}/cancel"), headers=web.headers(), timeout=10)
    assert r.status_code == 200
    stream.finish(timeout=5)
    assert stream.ended_by_server
    assert [e["data"]["status"] for e in stream.events] == ["queued", "canceled"]
    web.wait_subscribers(0)

    # A finished job's stream replays its events and ends at once.
    done = web.job({"steps": 2})
    wait_done(done)
    started = time.monotonic()
    replay = listen(web, f"/api/jobs/{done}/events").finish(timeout=5)
    assert time.monotonic() - started < KEEPALIVE, "it ended without waiting"
    assert replay.ended_by_server and replay.ids == logged(job=done)
    assert replay.events[-1]["data"]["status"] == "completed"
    # An EventSource reconnects after the end with the last id it got: it ends again, empty
    # (it used to stay open forever, sending keep-alives and holding a server thread).
    again = listen(web, f"/api/jobs/{done}/events",
                   headers={"Last-Event-ID": str(replay.ids[-1])}).finish(timeout=5)
    assert again.ended_by_server and again.ids == []


def test_a_hundred_concurrent_sse_clients_all_receive_every_event(web, worker):
    # Given 100 clients on the project's stream of one web process
    end: str | None = None  # the job, once it exists: each client stops at its completion
    listeners = [Listener(web, f"/api/projects/{web.project}/events",
                          until=lambda e: end is not None and is_end_of(end)(e))
                 for _ in range(100)]
    for listener in listeners:
        listener.start()
    for listener in listeners:
        assert listener.connected.wait(15)
    web.wait_subscribers(100)

    # When a job with 20 steps runs
    job_id = web.job({"steps": 20})
    end = job_id
    wait_done(job_id)

    # Then every client received every event, in order, once
    expected = logged(project=web.project)
    assert len(expected) >= 22
    for listener in listeners:
        assert listener.finish(timeout=20).ids == expected
    web.wait_subscribers(0)


def test_a_client_that_stops_reading_is_dropped_and_does_not_delay_the_others(web, worker):
    # Given a project whose stored history (~10 MB) is more than any socket buffer holds
    pg.execute("INSERT INTO agent_job_events (project_id, type, message, data) "
               "SELECT %s, 'note', 'filler', jsonb_build_object('filler', repeat('x', 16000)) "
               "FROM generate_series(1, 600)", (web.project,))
    history_end = logged(project=web.project)[-1]
    # and a client that asks for all of it with a tiny receive buffer, then never reads
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    host, port = web.base.removeprefix("http://").split(":")
    stuck.connect((host, int(port)))
    stuck.sendall(f"GET /api/projects/{web.project}/events HTTP/1.1\r\nHost: {host}\r\n"
                  f"Authorization: Bearer {web.token}\r\n\r\n".encode())
    try:
        web.wait_subscribers(1)
        # and a client that follows the live events
        reader = listen(web, f"/api/projects/{web.project}/events",
                        headers={"Last-Event-ID": str(history_end)})
        web.wait_subscribers(2)

        # When three canaries write more events than a subscriber's queue holds
        jobs = [web.job({"steps": 800}) for _ in range(3)]  # one event a step (and 3 a job)
        wait_done(*jobs, timeout=60)
        expected = logged(project=web.project)
        live = logged(project=web.project, after=history_end)
        assert len(live) > QUEUE_LIMIT

        # Then the reader got every live event, in order, each within moments of its writing
        wait(lambda: len(reader.events) >= len(live), 10, "the reader to catch up")
        assert reader.ids == live
        lags = [e["received_at"] - datetime.fromisoformat(e["created_at"]).timestamp()
                for e in reader.events]
        assert max(lags) < 1.5, f"slowest event arrived {max(lags):.2f}s after it was written"
        # and the stuck client was dropped by the hub: only the reader is subscribed
        web.wait_subscribers(1, timeout=5)
        reader.stop.set()
        reader.finish()

        # And the stuck client, reading at last, finds a clean end after a gap-free prefix
        stuck.settimeout(10)
        got = [int(m) for m in re.findall(rb"^id: (\d+)$", _read_chunked_stream(stuck), re.M)]
        assert got == expected[:len(got)], "what it got is the log's beginning"
        assert len(got) < len(expected), "it was cut off"
        # from where it resumes with no gap and no duplicate
        rest = listen(web, f"/api/projects/{web.project}/events",
                      headers={"Last-Event-ID": str(got[-1] if got else 0)},
                      until=lambda e: e["id"] == expected[-1]).finish()
        assert got + rest.ids == expected
    finally:
        stuck.close()


def _read_chunked_stream(sock: socket.socket) -> bytes:
    """Read an HTTP response whose chunked body the server ends; returns the body."""
    buf = bytearray()

    def need(n: int) -> None:
        while len(buf) < n:
            more = sock.recv(1 << 20)
            assert more, "the connection closed before the end of the body"
            buf.extend(more)

    def line() -> bytes:
        while (at := buf.find(b"\r\n")) < 0:
            need(len(buf) + 1)
        out = bytes(buf[:at])
        del buf[:at + 2]
        return out

    head = [line()]
    while head[-1]:
        head.append(line())
    assert head[0].startswith(b"HTTP/1.1 200"), head
    assert b"transfer-encoding: chunked" in b"\n".join(head).lower(), head
    body = []
    while size := int(line(), 16):
        need(size + 2)
        body.append(bytes(buf[:size]))
        del buf[:size + 2]
    return b"".join(body)


def test_keep_alive_comments_arrive_on_an_idle_stream(web):
    stream = listen(web, f"/api/projects/{web.project}/events")
    time.sleep(KEEPALIVE * 2.5)
    stream.stop.set()
    stream.finish()
    assert stream.ids == []
    assert stream.comments[0] == "connected"
    assert stream.comments.count("keep-alive") >= 2


def _one_answer(s: socket.socket) -> bytes:
    """One HTTP answer read off `s`: its head, and as much body as its Content-Length says."""
    answer = b""
    while True:
        head, sep, body = answer.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        if sep and length and len(body) >= int(length.group(1)):
            return answer
        got = s.recv(65536)
        if not got:
            return answer
        answer += got


def test_stream_refusals_over_the_wire(web):
    # Another owner's project over WebSocket: a plain 404 before any upgrade (flask-sock
    # accepts the upgrade before the route runs; the checks must come first).
    with session_scope(session_factory()) as s:
        _, other = create_token(s, "bob")
    for path in (f"/ws/projects/{web.project}", f"/ws/projects/{uuid.uuid4()}"):
        with pytest.raises(simple_websocket.ConnectionError) as refused:
            simple_websocket.Client(web.url(path).replace("http://", "ws://"),
                                    headers={"Authorization": f"Bearer {other}"})
        assert refused.value.status_code == 404
    with pytest.raises(simple_websocket.ConnectionError) as refused:
        simple_websocket.Client(web.url(f"/ws/projects/{web.project}").replace("http", "ws"))
    assert refused.value.status_code == 401
    with pytest.raises(simple_websocket.ConnectionError) as refused:
        simple_websocket.Client(web.url(f"/ws/projects/{web.project}?cursor=x")
                                .replace("http", "ws"), headers=web.headers())
    assert refused.value.status_code == 400
    web.wait_subscribers(0)

    # A body announced larger than 1 MiB is refused on its Content-Length, unread.
    host, port = web.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.settimeout(10)
        s.sendall(f"POST /api/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {web.token}"
                  f"\r\nContent-Type: application/json\r\nContent-Length: {2 * 1024 * 1024}"
                  "\r\n\r\n{".encode())
        answer = b""
        while b'"payload_too_large"' not in answer:  # headers and body may come apart
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert b'"payload_too_large"' in answer
    assert tuple_row("SELECT count(*) FROM projects WHERE owner_id IS NOT NULL")[0] == 1

    # Sent chunked, it has no length to be refused on: read, it is still refused past 1 MiB
    # (Werkzeug's cap cut such a body at the limit, and the valid JSON ahead of the padding
    # was written). Exactly 1 MiB is taken.
    for padding, status in ((2 * 1024 * 1024, b"413"), (None, b"201")):
        body = b'{"name": "chunked"}'
        body += b" " * ((padding or 1024 * 1024) - len(body))
        with socket.create_connection((host, int(port))) as s:
            s.settimeout(30)
            s.sendall(f"POST /api/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      f"{web.token}\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n".encode())
            for at in range(0, len(body), 65536):
                chunk = body[at:at + 65536]
                try:
                    s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                except OSError:  # refused and closed while still sending: the answer is read
                    break
            else:
                s.sendall(b"0\r\n\r\n")
            answer = _one_answer(s)
        assert answer.startswith(b"HTTP/1.1 " + status), answer[:300]
    assert tuple_row("SELECT count(*) FROM projects WHERE name = 'chunked'")[0] == 1


def test_a_stream_the_client_left_gives_its_slot_back_within_seconds(procs: Procs) -> None:
    # An idle stream learnt its client was gone only when a keep-alive write failed (every
    # SWITCHYARD_SSE_KEEPALIVE_SECONDS, 15 by default): the token's slots stayed taken, and
    # a client that reconnected was refused for that long
    _, base = procs.web(threads=16, env={"SWITCHYARD_SSE_KEEPALIVE_SECONDS": "30",
                                         "SWITCHYARD_STREAMS_PER_TOKEN": "3"})
    token, project = tenant("carol", "slots")
    host, port = base.removeprefix("http://").split(":")
    request = (f"GET /api/projects/{project}/events?tail=0 HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {token}\r\n\r\n").encode()

    def open_stream() -> tuple[socket.socket, bytes]:
        s = socket.create_connection((host, int(port)))
        s.settimeout(10)
        s.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            got = s.recv(4096)
            if not got:
                break
            head += got
        return s, head

    streams = [open_stream() for _ in range(3)]
    assert all(head.startswith(b"HTTP/1.1 200") for _, head in streams)
    refused, head = open_stream()
    assert head.startswith(b"HTTP/1.1 429"), head[:200]
    refused.close()
    for s, _ in streams:
        s.close()
    left = time.monotonic()
    again, head = open_stream()
    while not head.startswith(b"HTTP/1.1 200") and time.monotonic() - left < 10:
        again.close()
        time.sleep(0.5)
        again, head = open_stream()
    again.close()
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    assert time.monotonic() - left < 5, "the slots came back only after the keep-alive"
