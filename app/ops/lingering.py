"""gunicorn's graceful close, done off the worker's main loop.

Closing a `Connection: close` connection (an HTTP/1.0 client, a 503 `streams_full` answer),
gunicorn 27's gthread worker half-closes it and then waits, up to 2 s, for the client's end
(RFC 9112 9.6: closing with unread input would reset the connection and cut the answer).
It waits in the thread that accepts and polls every connection of the process, so each
client that does not close at once stalled every other request for up to 2 s: 52 refused
event streams stalled the web process for ~100 s. Here one closer thread lingers on all of
them at once, with the same bounds (the timeout, the bytes drained), and a cap on how many
it holds: past it, a connection is closed at once, as before RFC 9112's advice.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

MAX_LINGERING = 1024
_POLL = 0.05  # how soon a newly handed-over socket is watched, while others linger


class Closer:
    def __init__(self) -> None:
        self._handed: queue.SimpleQueue[tuple[socket.socket, float, int]] = queue.SimpleQueue()
        self._count = 0  # handed over and not yet closed
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def close_graceful(self, sock: socket.socket, timeout: float = 2.0,
                       max_drain: int = 65536) -> None:
        """gunicorn.util.close_graceful's contract, returning at once."""
        try:
            sock.shutdown(socket.SHUT_WR)  # the client sees the answer end now
        except OSError:
            _close(sock)
            return
        with self._lock:
            if self._count >= MAX_LINGERING:
                full = True
            else:
                full = False
                self._count += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="linger-closer",
                                                    daemon=True)
                    self._thread.start()
        if full:
            _close(sock)
            return
        self._handed.put((sock, time.monotonic() + timeout, max_drain))

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        lingering: dict[socket.socket, list[Any]] = {}  # sock -> [deadline, bytes left]
        while True:
            try:  # nothing may end this thread: every socket handed over must be closed
                self._pass(selector, lingering)
            except Exception:
                log.exception("the linger closer's pass failed; closing what it held")
                for sock in list(lingering):
                    with contextlib.suppress(KeyError, ValueError, OSError):
                        selector.unregister(sock)
                    _close(sock)
                with self._lock:
                    self._count -= len(lingering)
                lingering.clear()

    def _pass(self, selector: selectors.BaseSelector,
              lingering: dict[socket.socket, list[Any]]) -> None:
        try:  # block while nothing lingers; poll briefly while something does
            item = self._handed.get(timeout=_POLL if lingering else None)
        except queue.Empty:
            item = None
        while item is not None:
            sock, deadline, max_drain = item
            if sock in lingering:  # handed over twice (gunicorn closes after an error too)
                with self._lock:
                    self._count -= 1
            else:
                try:
                    sock.setblocking(False)
                    selector.register(sock, selectors.EVENT_READ)
                    lingering[sock] = [deadline, max_drain]
                except (OSError, ValueError, KeyError):  # closed meanwhile, or its fd reused
                    _close(sock)
                    with self._lock:
                        self._count -= 1
            try:
                item = self._handed.get_nowait()
            except queue.Empty:
                item = None
        done: list[socket.socket] = []
        for key, _ in selector.select(timeout=0):
            sock = key.fileobj  # type: ignore[assignment]
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            lingering[sock][1] -= len(data)
            if not data or lingering[sock][1] <= 0:
                done.append(sock)
        now = time.monotonic()
        done += [s for s, (deadline, _) in lingering.items()
                 if deadline <= now and s not in done]
        for sock in done:
            with contextlib.suppress(KeyError, ValueError, OSError):
                selector.unregister(sock)
            del lingering[sock]
            _close(sock)
        if done:
            with self._lock:
                self._count -= len(done)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


def install() -> None:
    """In a gunicorn worker process: its graceful closes go to one closer thread."""
    from gunicorn import util

    if hasattr(util, "close_graceful"):  # gunicorn >= 27; older ones close at once
        util.close_graceful = Closer().close_graceful
