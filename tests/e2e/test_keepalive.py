"""Answers sent without reading the request body close the connection (issue 9, item 4).

A real gunicorn process and one keep-alive client (http.client): an answer that
leaves a body unread (a 413 judged on Content-Length, a 401 before the body is
parsed) must say `Connection: close`, so the client opens a fresh connection for
its next request. Before, gunicorn announced keep-alive, drained at most 64 KiB
of the leftover body and then dropped the connection: the next request on it
failed with "Remote end closed connection without response".
"""

from __future__ import annotations

import http.client
import json

import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tests.e2e.procs import Procs

pytestmark = pytest.mark.e2e

MiB = 1024 * 1024


def test_an_answer_that_leaves_the_body_unread_closes_the_connection(procs: Procs) -> None:
    _, base = procs.web(threads=4)
    with session_scope(session_factory()) as s:
        _, token = create_token(s, "keepalive")
    host, port = base.removeprefix("http://").split(":")
    auth = {"Authorization": f"Bearer {token}"}
    conn = http.client.HTTPConnection(host, int(port), timeout=15)

    def call(method: str, body: bytes | None = None, headers: dict[str, str] | None = None
             ) -> http.client.HTTPResponse:
        conn.request(method, "/api/projects", body=body,
                     headers={"Content-Type": "application/json", **auth, **(headers or {})})
        response = conn.getresponse()
        response.read()
        return response

    # Given a kept-alive connection (a body that was read keeps it open)
    created = call("POST", json.dumps({"name": "kept"}).encode())
    assert created.status == 201 and created.getheader("Connection") == "keep-alive"
    first_socket = conn.sock
    assert call("GET").status == 200 and conn.sock is first_socket

    # When a body over 1 MiB is announced (only its first bytes sent: it is judged unread)
    conn.putrequest("POST", "/api/projects")
    for name, value in {**auth, "Content-Type": "application/json",
                        "Content-Length": str(2 * MiB)}.items():
        conn.putheader(name, value)
    conn.endheaders(b'{"name": "')
    too_large = conn.getresponse()
    too_large.read()
    # Then the answer says so, and the client's next request (on a new connection) succeeds
    assert too_large.status == 413 and too_large.getheader("Connection") == "close"
    assert call("GET").status == 200

    # The same for a refusal before the body is read: a wrong token with a 256 KiB body
    refused = call("POST", b'{"name": "' + b"x" * (256 * 1024) + b'"}',
                   {"Authorization": "Bearer not-a-token"})
    assert refused.status == 401 and refused.getheader("Connection") == "close"
    assert call("GET").status == 200
