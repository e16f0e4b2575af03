"""Answers sent before the request body was read close the connection.

To keep a connection open after an answer, the server must find where the next request
starts, so it drains whatever body the application left unread (a 413 judged on
Content-Length, a 401 before the body is parsed). gunicorn drains at most 64 KiB and
otherwise drops the connection after announcing keep-alive: the client's next request on
it fails ("server disconnected"). Saying `Connection: close` lets the client open a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _CountingInput:
    """wsgi.input, counting what the application reads of it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.read_bytes = 0
        self.at_end = False  # a read came back empty, or read everything

    def read(self, size: int | None = -1) -> bytes:
        whole = size is None or size < 0
        data = self._stream.read() if whole else self._stream.read(size)
        return self._count(data, whole)

    def readline(self, size: int | None = -1) -> bytes:
        return self._count(self._stream.readline(size), False)

    def readlines(self, hint: int = -1) -> list[bytes]:
        return list(self)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def _count(self, data: bytes, whole: bool) -> bytes:
        self.read_bytes += len(data)
        self.at_end = self.at_end or whole or not data
        return data


def _body_left(environ: dict[str, Any], body: _CountingInput) -> bool:
    if body.at_end:
        return False
    length = environ.get("CONTENT_LENGTH") or ""
    if length.strip().isdigit():
        return body.read_bytes < int(length)
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


class CloseUnreadBody:
    """WSGI middleware: `Connection: close` on any answer that leaves request body unread."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse
                 ) -> Iterable[bytes]:
        body = _CountingInput(environ["wsgi.input"])
        environ["wsgi.input"] = body

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if _body_left(environ, body):
                headers = [*headers, ("Connection", "close")]
                # gunicorn drops an application's Connection header (hop-by-hop) and
                # decides itself; its start_response is a method of its Response, whose
                # force_close() makes it answer `Connection: close` and close. Werkzeug's
                # server honours the header itself.
                force_close = getattr(getattr(start_response, "__self__", None),
                                      "force_close", None)
                if callable(force_close):
                    force_close()
            return start_response(status, headers, exc_info)

        return self.app(environ, start)
