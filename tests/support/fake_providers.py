"""Real local stand-ins for the providers effects go to, which count everything they receive.

`FakeProviders` is one HTTP server (Flask in a thread, on a free port) playing a
deploy hook, the GitHub API, an ads API and the Resend API; `FakeSmtp` is an
aiosmtpd server keeping every message. The effect tests assert on what these
received, so "sent once" means one request arrived, not that our code said so.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from flask import Flask, Response, request
from werkzeug.serving import make_server

NOT_PROCESSED = {401, 403, 408, 425, 429}


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    idempotency_key: str | None
    authorization: str | None
    body: Any
    query: dict[str, str]
    host: str = ""  # the Host header the request carried
    signature: str | None = None  # X-Switchyard-Signature, when the hook call was signed
    raw: bytes = b""  # the body as sent, what a signature covers


@dataclass
class Scripted:
    status: int
    body: Any
    headers: dict[str, str]
    delay: float


@dataclass
class FakeProviders:
    url: str = ""
    received: list[Received] = field(default_factory=list)
    delay: float = 0.0  # seconds every POST waits before answering (widens races)
    github_token: str = "ghp-test-token-0123456789"
    resend_key: str = "re_test_key_0123456789"
    _scripts: dict[tuple[str, str], list[Scripted]] = field(default_factory=dict)
    _deploys: dict[str, tuple[int, Any]] = field(default_factory=dict)
    _campaigns: dict[str, dict[str, Any]] = field(default_factory=dict)
    _emails: dict[str, dict[str, Any]] = field(default_factory=dict)
    _email_keys: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def posts(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.received
                    if r.method == "POST" and (path is None or r.path == path)]

    def gets(self, path: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.received
                    if r.method == "GET" and (path is None or r.path == path)]

    def script(self, method: str, path: str, status: int, body: Any = None, *,
               headers: dict[str, str] | None = None, delay: float = 0.0) -> None:
        """Answer the next such request like this (once). In a string body, "{authorization}"
        becomes the request's Authorization header: a careless provider echoing it back."""
        self._scripts.setdefault((method, path), []).append(
            Scripted(status, body, headers or {}, delay))

    def _scripted(self, method: str, path: str) -> Scripted | None:
        with self._lock:
            queue = self._scripts.get((method, path))
            return queue.pop(0) if queue else None

    def _record(self) -> Received:
        got = Received(request.method, request.path, request.headers.get("Idempotency-Key"),
                       request.headers.get("Authorization"), request.get_json(silent=True),
                       dict(request.args), request.host,
                       request.headers.get("X-Switchyard-Signature"), request.get_data())
        with self._lock:
            self.received.append(got)
        return got


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    text = "" if body is None else json.dumps(body)
    return Response(text, status=status, headers=headers or {},
                    mimetype="application/json" if body is not None else None)


def build_app(fake: FakeProviders) -> Flask:
    app = Flask("fake_providers")

    def answer(got: Received) -> Response | None:
        """A scripted answer, if one is queued for this request."""
        scripted = fake._scripted(got.method, got.path)
        if scripted is None:
            return None
        time.sleep(scripted.delay)
        body = scripted.body
        if isinstance(body, str):
            body = body.replace("{authorization}", got.authorization or "")
        elif body is not None:
            body = json.loads(json.dumps(body).replace("{authorization}", got.authorization or ""))
        return _json(scripted.status, body, scripted.headers)

    def bearer_ok(got: Received, token: str) -> bool:
        return got.authorization == f"Bearer {token}"

    @app.post("/deploy/<name>")
    def deploy(name: str) -> Response:
        got = fake._record()
        time.sleep(fake.delay)
        scripted = answer(got)
        if scripted is not None:
            # A hook remembers what it acted on or refused, not what it turned away unread.
            if got.idempotency_key and scripted.status_code not in NOT_PROCESSED:
                fake._deploys[got.idempotency_key] = (scripted.status_code,
                                                      scripted.get_json(silent=True))
            return scripted
        key = got.idempotency_key or uuid.uuid4().hex
        with fake._lock:
            if key not in fake._deploys:  # a deploy hook honouring Idempotency-Key
                fake._deploys[key] = (200, {"id": f"dep_{len(fake._deploys) + 1}",
                                            "hook": name, "status": "queued"})
            code, body = fake._deploys[key]
        return _json(code, body)

    @app.get("/deploy/<name>")
    def deploy_status(name: str) -> Response:
        got = fake._record()
        key = got.query.get("idempotency_key", "")
        if key not in fake._deploys:
            return _json(404, {"idempotency_key": key, "found": False})
        code, body = fake._deploys[key]
        return _json(200, {"idempotency_key": key, "found": True, "status_code": code,
                           "response": body})

    @app.post("/repos/<owner>/<repo>/dispatches")
    def dispatch(owner: str, repo: str) -> Response:
        got = fake._record()
        time.sleep(fake.delay)
        scripted = answer(got)
        if scripted is not None:
            return scripted
        if not bearer_ok(got, fake.github_token):
            return _json(401, {"message": "Bad credentials"})
        return _json(204, None)

    @app.post("/campaigns")
    def create_campaign() -> Response:
        got = fake._record()
        time.sleep(fake.delay)
        scripted = answer(got)
        if scripted is not None:
            return scripted
        key = got.idempotency_key or uuid.uuid4().hex
        with fake._lock:
            if key not in fake._campaigns:
                fake._campaigns[key] = {"id": f"cmp_{len(fake._campaigns) + 1}",
                                        **(got.body or {})}
            return _json(201, fake._campaigns[key])

    @app.get("/campaigns")
    def find_campaigns() -> Response:
        got = fake._record()
        found = fake._campaigns.get(got.query.get("idempotency_key", ""))
        return _json(200, {"data": [found] if found else []})

    @app.post("/emails")
    def send_email() -> Response:
        got = fake._record()
        time.sleep(fake.delay)
        scripted = answer(got)
        if scripted is not None:
            return scripted
        if not bearer_ok(got, fake.resend_key):
            return _json(401, {"statusCode": 401, "name": "missing_api_key",
                               "message": "API key is invalid"})
        with fake._lock:
            key = got.idempotency_key or uuid.uuid4().hex
            if key not in fake._email_keys:  # Resend replays a key's first answer
                email_id = str(uuid.uuid4())
                fake._email_keys[key] = email_id
                fake._emails[email_id] = {"object": "email", "id": email_id,
                                          "last_event": "delivered", **(got.body or {})}
            return _json(200, {"id": fake._email_keys[key]})

    @app.get("/emails/<email_id>")
    def get_email(email_id: str) -> Response:
        got = fake._record()
        if not bearer_ok(got, fake.resend_key):
            return _json(401, {"message": "API key is invalid"})
        found = fake._emails.get(email_id)
        return _json(200, found) if found else _json(404, {"message": "Email not found"})

    return app


@dataclass(frozen=True)
class ReceivedMail:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage


class _SmtpHandler:
    def __init__(self, sink: FakeSmtp):
        self.sink = sink

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        await asyncio.sleep(self.sink.delay)
        if self.sink.refuse_next:
            reply, self.sink.refuse_next = self.sink.refuse_next, None
            return reply
        message = message_from_bytes(envelope.content, policy=policy.default)
        with self.sink.lock:
            self.sink.messages.append(
                ReceivedMail(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 Message accepted for delivery"


@dataclass
class FakeSmtp:
    host: str = "127.0.0.1"
    port: int = 0
    messages: list[ReceivedMail] = field(default_factory=list)
    refuse_next: str | None = None  # e.g. "550 mailbox unavailable": the next DATA gets it
    delay: float = 0.0  # seconds each DATA waits before its answer (a slow server widens races)
    lock: threading.Lock = field(default_factory=threading.Lock)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_providers() -> Iterator[FakeProviders]:
    fake = FakeProviders()
    server = make_server("127.0.0.1", 0, build_app(fake), threaded=True)
    fake.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="fake-providers", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        thread.join(5)


@pytest.fixture
def fake_smtp() -> Iterator[FakeSmtp]:
    sink = FakeSmtp(port=free_port())
    controller = Controller(_SmtpHandler(sink), hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()
