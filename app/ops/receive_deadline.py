"""gunicorn's gthread worker, with a bound on how long receiving one request may take.

gthread reads a request's headers, and the application its body, in one of its threads
(64 by default), with blocking reads and nothing bounding the whole: its only guard is a
5 s wait for a new connection's *first* byte. So anyone reaching the port could pin every
thread without a token, and the whole API timed out: 66 connections that each sent
`GET /healthz HTTP/1.1` and then one header line every 5 s, forever (or, with a token, a
body of Content-Length 900000 one byte every 2 s).

Here every read gunicorn's request parser makes (the headers, then the body, whether the
application reads it or gunicorn drains what it left) waits at most until the request's
deadline: SWITCHYARD_REQUEST_RECEIVE_SECONDS after its first read. Past it, the connection
is shut down and the read returns end-of-file, exactly as if the client had hung up
mid-request, a case gunicorn and the application already handle quietly (no answer is
written: the client could not tell it from its own request's fault anyway).

Why this and not something else:
- The socket's own timeout (`--timeout` is gunicorn's worker heartbeat, not a read timeout)
  bounds each read, not their sum: one byte per interval beats any per-read timeout. So
  each read here is given what is left of the request's total, as its timeout.
- Only the parser's reads are bounded, through a stand-in for the socket held by the
  parser alone. The application's socket (`gunicorn.socket`, the WebSocket's) and every
  answer written (an event stream lasting minutes) stay as they were: the deadline bounds
  receiving a request, never answering it.
- The clock starts at a request's first read, not at the connection: gthread waits for a
  new connection's first byte in a thread for 5 s, then parks it in its poller, and parks
  idle kept-alive connections there too (closed after `keepalive`, 2 s), so neither pins a
  thread. A request served after such a wait gets its whole deadline.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from typing import Any

from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers import gthread

from tasks.settings import get_settings


class DeadlineSocket:
    """The socket as gunicorn's request parser sees it: every read returns by the current
    request's deadline, or the connection is shut down and the read says end-of-file."""

    def __init__(self, sock: socket.socket, seconds: float,
                 on_expiry: Callable[[], None]) -> None:
        self._sock = sock
        self._seconds = seconds
        self._on_expiry = on_expiry
        self._deadline: float | None = None
        self._expired = False

    def restart(self) -> None:
        """A new request on the connection: its clock starts at its first read."""
        self._deadline = None

    def recv(self, size: int) -> bytes:
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self._seconds
        remaining = self._deadline - now
        prior = self._sock.gettimeout()
        if prior is not None and prior < remaining:
            # A tighter bound of gunicorn's own (its drain of an unread body, a non-blocking
            # read): its timeout, handled as gunicorn handles it.
            return self._sock.recv(size)
        if remaining > 0:
            self._sock.settimeout(remaining)
            try:
                return self._sock.recv(size)
            except TimeoutError:
                pass
            finally:
                self._sock.settimeout(prior)
        self._expire()
        if prior is not None:
            # The caller set a timeout of its own (gunicorn's drain of an unread body) and
            # handles one: the connection is then closed, not kept alive.
            raise TimeoutError("request not received within its deadline")
        return b""

    def _expire(self) -> None:
        if self._expired:
            return
        self._expired = True
        # Both ways: the application's answer to a cut-short body fails to send (EPIPE,
        # ignored by gunicorn) instead of reaching a client that could not make sense of it.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._on_expiry()

    def __getattr__(self, name: str) -> Any:  # settimeout, fileno, ...: the socket's own
        return getattr(self._sock, name)


class ThreadWorker(gthread.ThreadWorker):
    """`-k app.ops.receive_deadline.ThreadWorker`: gthread, each request's receiving bounded."""

    receive_seconds = 15.0

    def init_process(self) -> None:
        # Here, not at import: the process's settings (gthread's own init_process runs the
        # worker's loop and does not return).
        self.receive_seconds = get_settings().request_receive_seconds
        super().init_process()

    def handle(self, conn: Any) -> Any:
        bound: DeadlineSocket | None = conn.__dict__.get("receive_deadline")
        if bound is not None:
            bound.restart()  # the connection's next request
        elif "init" not in conn.__dict__:
            # A new connection. Its parser is made by conn.init(), inside gthread's handle()
            # after the wait for its first byte, and read from at once: the parser's socket
            # is swapped right there.
            init = conn.init

            def init_then_bound() -> None:
                init()
                unreader = getattr(conn.parser, "unreader", None)
                # HTTP/1 (HTTP/2, not served here, has a parser of its own); with TLS, the
                # parser's socket is the wrapped one.
                if isinstance(unreader, SocketUnreader) and "receive_deadline" not in conn.__dict__:
                    conn.receive_deadline = unreader.sock = self._deadline_for(conn, unreader.sock)

            conn.init = init_then_bound
        return super().handle(conn)

    def _deadline_for(self, conn: Any, sock: socket.socket) -> DeadlineSocket:
        client, seconds = conn.client, self.receive_seconds

        def expired() -> None:
            self.log.info("Closed the connection of %s: its request was not received "
                          "within %gs (SWITCHYARD_REQUEST_RECEIVE_SECONDS)", client, seconds)

        return DeadlineSocket(sock, seconds, expired)
