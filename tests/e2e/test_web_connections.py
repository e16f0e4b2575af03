"""A web process never holds more database connections than its one pool allows.

The web process reaches PostgreSQL through a forwarder that counts its
connections. Requests that read through the ORM and then write through the
engine (a cancel) are held up by a row lock the test keeps, so each stays in
the middle of its work while more arrive.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg
from tasks.settings import get_settings
from tests.e2e.procs import Procs
from tests.e2e.test_db_outage_web import _through
from tests.support.tcpproxy import TcpProxy

pytestmark = pytest.mark.e2e

CEILING = 20  # README: SWITCHYARD_WEB_DB_CONNECTIONS, its default
REQUESTS = 40


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    url = urlsplit(os.environ["DATABASE_URL"])
    p = TcpProxy((url.hostname or "127.0.0.1", url.port or 5432))
    yield p
    p.close()


def test_concurrent_requests_never_open_more_connections_than_the_pool_allows(
        procs: Procs, proxy: TcpProxy) -> None:
    # Given a web process with more threads than connections, a project and a queued job
    proxied = _through(proxy, os.environ["DATABASE_URL"])
    _, base = procs.web(threads=64, env={"DATABASE_URL": proxied})
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, "alice")
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'pool')",
               (project, owner_id))
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=auth, timeout=60) as c:
        job = c.post(f"/api/projects/{project}/jobs",
                     json={"job_type": "system.canary", "payload": {}}).json()["job_id"]

    # When the job's row is locked for 3 s and 40 cancels of it arrive at once (each reads
    # the job, then waits for the lock to write)
    with psycopg.connect(get_settings().libpq_url) as locker:
        locker.execute("SELECT 1 FROM agent_jobs WHERE id = %s FOR UPDATE", (job,))

        def cancel(_: int) -> tuple[int, str | None]:
            with httpx.Client(base_url=base, headers=auth, timeout=90) as c:
                r = c.post(f"/api/jobs/{job}/cancel")
                return r.status_code, r.headers.get("Retry-After")

        with ThreadPoolExecutor(REQUESTS) as ex:
            answers = ex.map(cancel, range(REQUESTS))
            most, deadline = 0, time.monotonic() + 3
            while time.monotonic() < deadline:
                most = max(most, proxy.connections)
                time.sleep(0.05)
            locker.rollback()
            codes = sorted(set(answers))

    # Then the process held at most the pool's connections, and every cancel was answered:
    # those holding a connection once the lock went, the others (who could not get one
    # within SWITCHYARD_WEB_DB_WAIT_SECONDS) with a 503 that says when to come back
    assert most <= CEILING, f"{most} connections open at once"
    assert most >= CEILING - 2, f"only {most}: the requests did not fill the pool"
    assert (200, None) in codes, codes
    assert set(codes) <= {(200, None), (503, "1")}, codes
