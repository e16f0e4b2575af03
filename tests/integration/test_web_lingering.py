"""A client that does not close its end never stalls anyone else's request.

gunicorn 27's gthread worker closes a `Connection: close` connection (an HTTP/1.0 client,
a 503 `streams_full`) "gracefully": it half-closes, then waits up to 2 s for the client's
FIN, in the thread that accepts and polls every connection. 52 SSE clients refused at
once stalled the whole web process for ~100 s (bench/http_latency.py part (b) timed out
on GET /metrics). app.ops.gunicorn_conf lets one closer thread do that waiting.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from app.ops.commands import web_command
from app.ops.embedded import free_port

ROOT = Path(__file__).parents[2]
LINGERERS = 6


def test_clients_that_never_close_do_not_stall_the_web_process(db: None,
                                                                tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        web = subprocess.Popen(web_command("127.0.0.1", port, 8), cwd=ROOT, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    lingering: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            assert web.poll() is None, log.read_text()
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)

        # Given clients that each send an HTTP/1.0 request and then never close their end
        for _ in range(LINGERERS):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n")
            lingering.append(s)
        # (each gets its answer)
        for s in lingering:
            s.settimeout(10)
            assert s.recv(4096).startswith(b"HTTP/1.0 200")

        # Then another client's requests are answered at once, not after 2 s per lingerer
        start = time.monotonic()
        for _ in range(3):
            assert httpx.get(base + "/healthz", timeout=30).status_code == 200
        took = time.monotonic() - start
        assert took < 1.5, f"3 requests took {took:.1f}s behind {LINGERERS} lingering clients"
        # And every lingerer got the server's end of the connection (its FIN) meanwhile
        for s in lingering:
            s.settimeout(1)
            while s.recv(4096):
                pass
        assert web.poll() is None, log.read_text()
    finally:
        for s in lingering:
            s.close()
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()


def test_a_socket_handed_over_twice_leaves_the_closer_working() -> None:
    # gunicorn's gthread closes gracefully after an error mid-answer and again when it
    # finishes the request: the same socket, twice
    from app.ops.lingering import Closer

    closer = Closer()
    ours, theirs = socket.socketpair()
    closer.close_graceful(ours, timeout=0.3)
    closer.close_graceful(ours, timeout=0.3)
    later, peer = socket.socketpair()
    closer.close_graceful(later, timeout=0.3)
    time.sleep(1.0)
    assert closer._thread is not None and closer._thread.is_alive()
    assert ours.fileno() == -1 and later.fileno() == -1  # both closed at their deadline
    assert closer._count == 0
    for s in (theirs, peer):
        s.close()
