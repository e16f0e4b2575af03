"""A local stand-in for Anthropic's Messages API, so the real SDK is tested over real HTTP.

The SDK talks httpx2, which mocks for httpx do not intercept; a real server on a
free port is the honest way. It answers POST /v1/messages plainly or as SSE (the
event sequence the SDK expects, tool_use input sent as input_json_delta pieces),
counts what it receives, and can be told to refuse the next requests with a
429/529 and a retry-after header.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float  # time.time() on arrival
    status: int  # what the fake answered


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class FakeAnthropic:
    """The fake server. Set `text`, `tool_input` or `usage` to shape the next answers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.received: list[Received] = []
        self._failures: deque[tuple[int, float | None]] = deque()
        self._stream_breaks: deque[str] = deque()
        self.text: str | None = None  # None: echo the last user message
        self.tool_input: dict[str, Any] = {"location": "Paris"}
        self.usage = (12, 7)  # (input_tokens, output_tokens) reported per answer
        self.delay = 0.0  # seconds a successful answer waits before it starts
        self.chunk_delay = 0.0  # seconds between the events of a streamed answer
        # A model of your own: given the request body, the answer's content blocks (tool_use
        # blocks need no id: the fake numbers them). None: the text / tool_input answer above.
        self.script: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True,
                                   request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True, name="fake-anthropic")
        self._thread.start()

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def fail_next(self, n: int = 1, status: int = 429, retry_after: float | None = 1.0) -> None:
        """Answer the next `n` requests with `status` (and a retry-after header, if given)."""
        with self._lock:
            self._failures.extend([(status, retry_after)] * n)

    def break_next_stream(self, error_type: str = "overloaded_error") -> None:
        """Cut the next streamed answer short with an `event: error` after its first text."""
        with self._lock:
            self._stream_breaks.append(error_type)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    # --- the server side -----------------------------------------------------

    def _wsgi(self, environ: dict, start_response: Any) -> Any:
        return self._handle(Request(environ))(environ, start_response)

    def _handle(self, request: Request) -> Response:
        if request.method != "POST" or request.path != "/v1/messages":
            return _error(404, "not_found_error", f"no route {request.method} {request.path}")
        auth = request.headers.get("authorization", "")
        if not (auth.startswith("Bearer ") and auth[7:].strip()) and \
                not request.headers.get("x-api-key"):
            return _error(401, "authentication_error", "no API key")
        body = request.get_json(force=True)
        with self._lock:
            status, retry_after = self._failures.popleft() if self._failures else (200, None)
            self.received.append(Received(body, dict(request.headers), time.time(), status))
            n = len(self.received)
        if status != 200:
            headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
            return _error(status, ERROR_TYPES.get(status, "api_error"), "refused on purpose",
                          headers)
        message = self._message(body, n)
        time.sleep(self.delay)
        if body.get("stream"):
            with self._lock:
                cut = self._stream_breaks.popleft() if self._stream_breaks else None
            return Response(_paced(_sse(message, cut), self.chunk_delay), status=200,
                            mimetype="text/event-stream")
        return Response(json.dumps(message), status=200, mimetype="application/json",
                        headers={"request-id": f"req_{n}"})

    def _message(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        if self.script is not None:
            content = [{**block, "id": block.get("id") or f"toolu_{n}_{i}"}
                       if block["type"] == "tool_use" else block
                       for i, block in enumerate(self.script(body))]
            stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
            input_tokens, output_tokens = self.usage
            return {"id": f"msg_{n}", "type": "message", "role": "assistant",
                    "model": body.get("model", "unknown"), "stop_reason": stop,
                    "stop_sequence": None, "content": content,
                    "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}
        text = self.text if self.text is not None else \
            f"Hello from the fake. You said: {_last_user_text(body)}"
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        stop_reason = "end_turn"
        if body.get("tools"):
            content.append({"type": "tool_use", "id": f"toolu_{n}",
                            "name": body["tools"][0]["name"], "input": self.tool_input})
            stop_reason = "tool_use"
        input_tokens, output_tokens = self.usage
        return {"id": f"msg_{n}", "type": "message", "role": "assistant",
                "model": body.get("model", "unknown"), "stop_reason": stop_reason,
                "stop_sequence": None, "content": content,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def _error(status: int, kind: str, message: str,
           headers: dict[str, str] | None = None) -> Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Response(json.dumps(body), status=status, mimetype="application/json",
                    headers=headers or {})


def _sse(message: dict[str, Any], cut: str | None = None) -> Iterator[str]:
    """The Messages API's event sequence for `message`, text in word-sized deltas.

    With `cut`, an error event of that type follows the first text delta, and nothing else.
    """

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    start = {**message, "content": [], "stop_reason": None,
             "usage": {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}}
    yield event("message_start", {"message": start})
    yield event("ping", {})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield event("content_block_start", {"index": index,
                                                "content_block": {"type": "text", "text": ""}})
            for piece in _pieces(block["text"]):
                yield event("content_block_delta", {
                    "index": index, "delta": {"type": "text_delta", "text": piece}})
                if cut:
                    yield event("error", {"error": {"type": cut, "message": "cut short"}})
                    return
        else:
            yield event("content_block_start", {"index": index,
                                                "content_block": {**block, "input": {}}})
            encoded = json.dumps(block["input"])
            half = len(encoded) // 2
            for part in (encoded[:half], encoded[half:]):
                yield event("content_block_delta", {
                    "index": index, "delta": {"type": "input_json_delta", "partial_json": part}})
        yield event("content_block_stop", {"index": index})
    yield event("message_delta", {
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]}})
    yield event("message_stop", {})


def _paced(events: Iterator[str], pause: float) -> Iterator[str]:
    """Each event on its own, `pause` seconds apart: a model that writes slowly."""
    for i, event in enumerate(events):
        if i and pause:
            time.sleep(pause)
        yield event


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]] if words else [text]


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic()
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def anthropic_model(fake_anthropic: FakeAnthropic,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """The LLM layer on the real anthropic SDK, pointed at the fake (the in-process worker
    reads the same settings); the environment, settings and client are restored after."""
    from tasks.services.llm import reset_client
    from tasks.settings import get_settings

    monkeypatch.setenv("SWITCHYARD_LLM_PROVIDER", "anthropic")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("SWITCHYARD_LLM_MODEL", "claude-test-1")
    get_settings.cache_clear()
    reset_client()
    yield fake_anthropic
    monkeypatch.undo()
    get_settings.cache_clear()
    reset_client()
