"""Event streams a hostile client cannot use to take the web process down (issue 9, item 1).

A real gunicorn process; clients are real sockets. Each test failed before its fix:
the flooded socket grew the process by every byte sent, a token could open
streams without limit, and a stream never ended.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import psutil
import pytest
import simple_websocket

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg
from tests.e2e.procs import Proc, Procs
from tests.e2e.test_streams import tenant

pytestmark = pytest.mark.e2e

CAP, LIFETIME = 3, 4.0


@dataclass
class Web:
    base: str
    token: str
    project: str
    proc: Proc

    def headers(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}

    def ws_url(self) -> str:
        return f"{self.base.replace('http://', 'ws://')}/ws/projects/{self.project}"

    def rss(self) -> int:
        """Resident memory of gunicorn's worker process (the master's only child)."""
        return sum(c.memory_info().rss for c in psutil.Process(self.proc.pid).children())


@pytest.fixture
def web(procs: Procs) -> Iterator[Web]:
    proc, base = procs.web(threads=16, env={
        "SWITCHYARD_STREAMS_PER_TOKEN": str(CAP), "SWITCHYARD_STREAM_MAX_SECONDS": str(LIFETIME),
        "SWITCHYARD_SSE_KEEPALIVE_SECONDS": "0.5"})
    token, project = tenant("mallory", "limits")
    yield Web(base, token, project, proc)


def test_a_socket_flooded_with_input_is_closed_and_the_process_stays_small(web: Web) -> None:
    # Given a WebSocket subscriber, and the web process's memory
    ws = simple_websocket.Client(web.ws_url(), headers=web.headers())
    before = web.rss()
    # When it pushes 40 MB of messages it was never asked for (each under the size cap)
    chunk, sent = "x" * (60 * 1024), 0
    try:
        while sent < 40 * 1024 * 1024:
            ws.send(chunk)
            sent += len(chunk)
        ws.receive(timeout=5)
    except (simple_websocket.ConnectionClosed, OSError):
        pass  # closed under our feet: a send may meet the socket already gone
    # Then the server closed it as a policy violation long before the 40 MB
    assert sent < 20 * 1024 * 1024, f"{sent / 2**20:.0f} MiB were taken in"
    assert ws.close_reason == 1008, (ws.close_reason, ws.close_message)
    # and the web process kept answering, its memory not holding what was sent
    assert httpx.get(web.base + "/healthz", timeout=5).status_code == 200
    grew = web.rss() - before
    assert grew < 16 * 1024 * 1024, f"the web process grew by {grew / 2**20:.0f} MiB"


def test_a_message_over_64_kib_is_refused(web: Web) -> None:
    ws = simple_websocket.Client(web.ws_url(), headers=web.headers())
    with pytest.raises(simple_websocket.ConnectionClosed) as closed:
        ws.send("y" * (65 * 1024))
        ws.receive(timeout=5)
    assert closed.value.reason == 1009


def _sse(web: Web) -> tuple[threading.Event, threading.Event]:
    """An SSE client in a thread: (connected with 200, stop it)."""
    connected, stop = threading.Event(), threading.Event()

    def run() -> None:
        try:
            with httpx.stream("GET", f"{web.base}/api/projects/{web.project}/events",
                              headers=web.headers(), timeout=30) as r:
                assert r.status_code == 200
                connected.set()
                for _ in r.iter_lines():
                    if stop.is_set():
                        return
        except httpx.TransportError:
            # A stopped client still waiting for its next line sees the web go at the
            # fixture's end ("peer closed connection"): that is not the test's failure.
            if not stop.is_set():
                raise

    threading.Thread(target=run, daemon=True).start()
    assert connected.wait(10)
    return connected, stop


def test_streams_over_the_per_token_cap_get_429_before_any_200(web: Web) -> None:
    # Given a token with as many streams open as it may hold (SSE and WebSocket together)
    held = [_sse(web)[1] for _ in range(CAP - 1)]
    sock = simple_websocket.Client(web.ws_url(), headers=web.headers())

    # Then one more is refused, with Retry-After, as SSE and as WebSocket
    r = httpx.get(f"{web.base}/api/projects/{web.project}/events", headers=web.headers(),
                  timeout=10)
    assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_streams"
    assert int(r.headers["Retry-After"]) >= 1
    with pytest.raises(simple_websocket.ConnectionError) as refused:
        simple_websocket.Client(web.ws_url(), headers=web.headers())
    assert refused.value.status_code == 429
    # And a stream that ends gives its slot back at once (well within a stream's lifetime)
    closed_at = time.monotonic()
    with contextlib.suppress(simple_websocket.ConnectionClosed, OSError):
        sock.close()
    while True:
        with httpx.stream("GET", f"{web.base}/api/projects/{web.project}/events",
                          headers=web.headers(), timeout=10) as r:
            if r.status_code == 200 or time.monotonic() - closed_at > LIFETIME - 1:
                break
        time.sleep(0.2)
    assert r.status_code == 200, "the closed socket's slot was not given back"

    # while another token was never affected
    with session_scope(session_factory()) as s:
        alice, other = create_token(s, "alice")
    theirs = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'theirs')",
               (theirs, alice))
    with httpx.stream("GET", f"{web.base}/api/projects/{theirs}/events",
                      headers=web.headers(other), timeout=10) as r:
        assert r.status_code == 200
    for stop in held:
        stop.set()


def test_a_stream_ends_after_its_lifetime_and_resumes_by_cursor(web: Web) -> None:
    started = time.monotonic()
    r = httpx.get(f"{web.base}/api/projects/{web.project}/events", headers=web.headers(),
                  timeout=LIFETIME * 3)
    took = time.monotonic() - started
    assert r.status_code == 200 and LIFETIME - 0.5 <= took <= LIFETIME + 3, took

    ws = simple_websocket.Client(web.ws_url(), headers=web.headers())
    with pytest.raises(simple_websocket.ConnectionClosed) as closed:
        while True:
            ws.receive(timeout=LIFETIME * 3)
    assert closed.value.reason == 1001
