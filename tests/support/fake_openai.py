"""A local server speaking OpenAI's Chat Completions, so the real `openai` SDK is tested over
real HTTP (as vLLM, Ollama or llama.cpp serve it to a self-hosting team).

POST /v1/chat/completions answers plainly or as SSE (`data: {chunk}` lines, `data: [DONE]`
last; tool call arguments in pieces; usage in a last, choice-less chunk when the request
asks `stream_options.include_usage`), records what it receives, and can refuse the next
requests with a status and a retry-after header.
"""

from __future__ import annotations

import contextlib
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


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    status: int


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class FakeOpenAI:
    """Set `text`, `tool_arguments` or `usage` to shape the next answers, or `script`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.received: list[Received] = []
        self._failures: deque[tuple[int, float | None, str]] = deque()
        self.text: str | None = None  # None: echo the last user message
        self.tool_arguments = '{"location": "Paris"}'  # raw, as a model writes them
        self.usage: tuple[int, int] | None = (21, 9)  # None: a server that reports none
        # A model of your own: request body -> (text, [(name, raw arguments)]).
        self.script: Callable[[dict[str, Any]], tuple[str, list[tuple[str, str]]]] | None = None
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True,
                                   request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True, name="fake-openai")
        self._thread.start()

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def fail_next(self, n: int = 1, status: int = 429, retry_after: float | None = 1.0,
                  code: str = "rate_limit_exceeded") -> None:
        with self._lock:
            self._failures.extend([(status, retry_after, code)] * n)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _wsgi(self, environ: dict, start_response: Any) -> Any:
        return self._handle(Request(environ))(environ, start_response)

    def _handle(self, request: Request) -> Response:
        if request.method != "POST" or request.path != "/v1/chat/completions":
            return _error(404, "not_found", f"no route {request.method} {request.path}")
        body = request.get_json(force=True)
        with self._lock:
            status, retry_after, code = (self._failures.popleft() if self._failures
                                         else (200, None, ""))
            self.received.append(Received(body, dict(request.headers), time.time(), status))
            n = len(self.received)
        if status != 200:
            headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
            return _error(status, code, "refused on purpose", headers)
        text, calls = self._answer(body)
        finish = "tool_calls" if calls else "stop"
        model = body.get("model", "unknown")
        usage = ({"prompt_tokens": self.usage[0], "completion_tokens": self.usage[1],
                  "total_tokens": sum(self.usage)} if self.usage else None)
        tool_calls = [{"id": f"call_{n}_{i}", "type": "function",
                       "function": {"name": name, "arguments": args}}
                      for i, (name, args) in enumerate(calls)]
        if body.get("stream"):
            wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _chunks(f"chatcmpl-{n}", model, text, tool_calls, finish,
                             usage if wants_usage else None)
            return Response(_sse(chunks), status=200, mimetype="text/event-stream")
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        completion = {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1,
                      "model": model, "choices": [{"index": 0, "message": message,
                                                   "finish_reason": finish}]}
        if usage:
            completion["usage"] = usage
        return Response(json.dumps(completion), status=200, mimetype="application/json",
                        headers={"x-request-id": f"req_{n}"})

    def _answer(self, body: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
        if self.script is not None:
            return self.script(body)
        text = self.text if self.text is not None else \
            f"Hello from the fake. You said: {last_user_text(body)}"
        calls = ([(body["tools"][0]["function"]["name"], self.tool_arguments)]
                 if body.get("tools") else [])
        return text, calls


def _chunks(cid: str, model: str, text: str, tool_calls: list[dict[str, Any]], finish: str,
            usage: dict[str, int] | None) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": 1, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    yield chunk({"role": "assistant", "content": ""})
    words = text.split(" ") if text else []
    for i, word in enumerate(words):
        yield chunk({"content": word + (" " if i < len(words) - 1 else "")})
    for index, call in enumerate(tool_calls):
        raw = call["function"]["arguments"]
        half = len(raw) // 2
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"],
                                                  "arguments": raw[:half]}}]})
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[half:]}}]})
    yield chunk({}, finish)
    if usage:
        yield {"id": cid, "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [], "usage": usage}


def _sse(chunks: Iterator[dict[str, Any]]) -> Iterator[str]:
    for c in chunks:
        yield f"data: {json.dumps(c)}\n\n"
    yield "data: [DONE]\n\n"


def _error(status: int, code: str, message: str,
           headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"message": message, "type": "error", "param": None, "code": code}}
    return Response(json.dumps(body), status=status, mimetype="application/json",
                    headers=headers or {})


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    try:
        yield fake
    finally:
        fake.close()


def messages_brain(brain: Callable[[dict[str, Any]], list[dict[str, Any]]]
                   ) -> Callable[[dict[str, Any]], tuple[str, list[tuple[str, str]]]]:
    """A brain written for the Messages API (tests/support/coding_brains.py) as a Chat
    Completions one: the request read back into Messages turns, the answer's blocks into
    text and tool calls. So the coding agent runs on the openai provider turn by turn."""
    def answer(body: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
        blocks = brain(as_messages_body(body))
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [(b["name"], json.dumps(b["input"])) for b in blocks if b["type"] == "tool_use"]
        return text, calls
    return answer


def as_messages_body(body: dict[str, Any]) -> dict[str, Any]:
    system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    turns: list[dict[str, Any]] = []
    for m in body["messages"]:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                     "content": m["content"]}
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant":
            content: list[dict[str, Any]] = (
                [{"type": "text", "text": m["content"]}] if m.get("content") else [])
            content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                         "input": json.loads(c["function"]["arguments"])}
                        for c in m.get("tool_calls") or []]
            turns.append({"role": "assistant", "content": content})
        elif turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
            turns[-1]["content"].append({"type": "text", "text": m["content"]})
        else:
            turns.append({"role": "user", "content": m["content"]})
    tools = [{"name": t["function"]["name"]} for t in body.get("tools") or []]
    return {"system": system, "tools": tools, "messages": turns}


@contextlib.contextmanager
def settings_from(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Iterator[None]:
    """Settings and the LLM clients re-read from `env` (this process and its in-process
    worker alike), and from the environment as it was afterwards."""
    from tasks.services.llm import reset_client
    from tasks.settings import get_settings

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    reset_client()
    try:
        yield
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
        reset_client()
