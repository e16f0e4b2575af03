"""The web tier while PostgreSQL is away: 503 with Retry-After, never 500, and back by itself.

The web process reaches the database through a TCP forwarder that the test cuts
(every connection reset, new ones refused) and restores on the same address, as
a PostgreSQL restart looks from the web process. Before the fix the answers
were 500s, and the first requests after the database came back failed too (the
pool handed out connections that had died while idle).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg
from tests.e2e.procs import Procs
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.e2e


def _through(proxy: TcpProxy, url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    auth = netloc[0] + "@" if len(netloc) == 2 else ""
    return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{proxy.port}"))


SERVED = {"list": 200, "enqueue": 202, "project": 200, "ready": 200}


def assert_served(answers: dict[str, httpx.Response]) -> None:
    assert {k: r.status_code for k, r in answers.items()} == SERVED, \
        {k: r.text for k, r in answers.items()}


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    url = urlsplit(os.environ["DATABASE_URL"])
    p = TcpProxy((url.hostname or "127.0.0.1", url.port or 5432))
    yield p
    p.close()


def test_the_web_tier_answers_503_while_the_database_is_away_and_recovers(
        procs: Procs, proxy: TcpProxy) -> None:
    # Given a web process whose database is behind the forwarder, a token and a project
    proxied = _through(proxy, os.environ["DATABASE_URL"])
    _, base = procs.web(threads=8, env={"DATABASE_URL": proxied})
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, "alice")
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'outage')",
               (project, owner_id))
    auth = {"Authorization": f"Bearer {token}"}

    def requests() -> dict[str, httpx.Response]:
        with httpx.Client(base_url=base, headers=auth, timeout=20) as c:
            return {
                "list": c.get(f"/api/projects/{project}/jobs"),         # ORM session
                "enqueue": c.post(f"/api/projects/{project}/jobs",      # the engine's pg
                                  json={"job_type": "system.canary", "payload": {}}),
                "project": c.get(f"/api/projects/{project}"),
                "ready": c.get("/readyz"),
            }

    ok = requests()
    assert_served(ok)

    # When the database goes away
    proxy.cut()
    away = requests()

    # Then every answer is a 503 in the contract's shape, with Retry-After; none a 500
    for name, r in away.items():
        assert r.status_code == 503, (name, r.status_code, r.text)
        assert int(r.headers["Retry-After"]) >= 1, name
        assert r.json()["error"]["code"] in ("database_unavailable", "not_ready"), (name, r.text)
    assert away["enqueue"].json()["error"]["code"] == "database_unavailable"
    assert "password" not in away["enqueue"].text and str(proxy.port) not in away["enqueue"].text

    # When it comes back, the very first requests succeed: no restart, no failed request
    # on a connection that died while the database was away
    proxy.restore()
    back = requests()
    assert_served(back)

    # And a restart that happens while no request is running (every pooled connection
    # dies unnoticed) costs no request either
    proxy.cut()
    time.sleep(1.5)
    proxy.restore()
    again = requests()
    assert_served(again)
