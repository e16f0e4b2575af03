"""Clients that send their request slowly never take the web process's threads from others.

gunicorn's gthread worker reads a request's headers, and the application its body, in one
of its threads, with no bound on how long that may take: a few dozen connections that each
sent `GET /healthz HTTP/1.1` and then one header line every 5 s (or, with a token, a body
of Content-Length 900000 one byte every 2 s) held every thread, and every other request
timed out. The web process now closes a connection whose request (headers and body) has
not arrived within SWITCHYARD_REQUEST_RECEIVE_SECONDS (app.ops.receive_deadline).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from app.ops.commands import web_command
from models.db import session_scope

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
THREADS = 4
RECEIVE_SECONDS = 2.0  # SWITCHYARD_REQUEST_RECEIVE_SECONDS, small so the test runs fast
SLOW_HEADERS = 4  # with SLOW_BODIES: more slow clients than the process has threads
SLOW_BODIES = 2
# A request's clock starts when a thread first reads it: the slow clients past the first
# THREADS wait for a thread (as every request does), then get their own RECEIVE_SECONDS.
ROUNDS = -(-(SLOW_HEADERS + SLOW_BODIES) // THREADS)
TRICKLE_EVERY = 0.5  # a slow client sends its next byte (or header line) this often
TRICKLE_FOR = 30.0  # and would go on this long (the test's bound) if nobody closed it


def _port() -> int:
    """A free port among those this suite may use (8400-8499)."""
    for port in range(8400, 8500):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 8400-8499")


@pytest.fixture
def web(db: None, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """`switchyard web`'s own command line (gunicorn_conf, gthread), with few threads."""
    port = _port()
    log = tmp_path / "web.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "SWITCHYARD_REQUEST_RECEIVE_SECONDS": str(RECEIVE_SECONDS),
           "SWITCHYARD_SSE_KEEPALIVE_SECONDS": "0.5"}
    with log.open("wb") as out:
        proc = subprocess.Popen(web_command("127.0.0.1", port, THREADS), cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield port, log
        assert proc.poll() is None, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class SlowClient(threading.Thread):
    """Sends `head` at once, then one of `trickle` every TRICKLE_EVERY seconds, until the
    server closes the connection (noted in `closed_after`, seconds after the first byte) or
    TRICKLE_FOR has passed."""

    def __init__(self, port: int, head: bytes, trickle: bytes) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.head, self.trickle = head, trickle
        self.closed_after: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        try:
            self.sock.sendall(self.head)
            while not self.stop.is_set() and time.monotonic() - start < TRICKLE_FOR:
                if self._server_closed():
                    self.closed_after = time.monotonic() - start
                    return
                self.sock.sendall(self.trickle)
        except OSError:  # reset or broken pipe: the server closed it
            self.closed_after = time.monotonic() - start
        finally:
            self.sock.close()

    def _server_closed(self) -> bool:
        """Whether the server ended the connection within TRICKLE_EVERY (its FIN, a reset,
        or an answer: nothing is ever answered before the request is complete)."""
        self.sock.settimeout(TRICKLE_EVERY)
        try:
            self.sock.recv(4096)
        except TimeoutError:
            return False
        except OSError:
            pass
        return True


def test_slow_clients_are_closed_and_never_hold_every_thread(web: tuple[int, Path]) -> None:
    port, log = web
    base = f"http://127.0.0.1:{port}"
    with session_scope(session_factory()) as s:
        _, token = create_token(s, "slow-clients")

    # Given more slow clients than the web process has threads: some trickling header lines
    # and never ending their headers, some with a valid token trickling a large body
    slow = [SlowClient(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", b"X-a: b\r\n")
            for _ in range(SLOW_HEADERS)]
    slow += [SlowClient(port, (f"POST /api/projects HTTP/1.1\r\nHost: x\r\n"
                               f"Authorization: Bearer {token}\r\n"
                               "Content-Type: application/json\r\n"
                               "Content-Length: 900000\r\n\r\n").encode(), b" ")
             for _ in range(SLOW_BODIES)]
    try:
        for client in slow:
            client.start()
        time.sleep(1.0)  # every thread is now taken by one of them

        # When another client asks for something, Then it is answered once the slow ones
        # holding the threads are cut (RECEIVE_SECONDS after they started), not never
        start = time.monotonic()
        assert httpx.get(base + "/healthz", timeout=15).status_code == 200
        answered_after = time.monotonic() - start
        assert answered_after < ROUNDS * RECEIVE_SECONDS, f"answered after {answered_after:.1f}s"

        # And every slow client was closed by the server soon after the deadline
        for client in slow:
            client.join(timeout=ROUNDS * RECEIVE_SECONDS + 5)
        closed = [c.closed_after for c in slow]
        assert all(c is not None for c in closed), f"still open: {closed}"
        assert all(RECEIVE_SECONDS - 0.5 <= c <= ROUNDS * RECEIVE_SECONDS + 2  # type: ignore[operator]
                   for c in closed), closed
    finally:
        for client in slow:
            client.stop.set()
        for client in slow:
            client.join(timeout=5)

    # And a client that sends its request at a normal pace, body included, is served, on a
    # kept-alive connection too
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                      timeout=10) as c:
        created = c.post("/api/projects", content=json.dumps({"name": "prompt"}).encode(),
                         headers={"Content-Type": "application/json"})
        assert created.status_code == 201, created.text
        assert c.get("/api/projects").status_code == 200

    # And a response that lasts longer than the deadline (an event stream) is not cut: the
    # deadline bounds receiving the request, not answering it
    project = created.json()["id"]
    with httpx.stream("GET", f"{base}/api/projects/{project}/events",
                      headers={"Authorization": f"Bearer {token}"}, timeout=10) as stream:
        assert stream.status_code == 200
        opened = time.monotonic()
        for _ in stream.iter_bytes():
            if time.monotonic() - opened > RECEIVE_SECONDS + 1:
                break
        assert time.monotonic() - opened > RECEIVE_SECONDS + 1, "the stream ended early"
    assert "Traceback" not in log.read_text(), log.read_text()
