"""No slow statement holds a connection for long: the server cuts a worker's statement at
SWITCHYARD_WORKER_STATEMENT_TIMEOUT_SECONDS and a web request's at the web's (5 s by
default), and a request that finds every pooled connection lent is answered 503 at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from app.http import pgpool
from app.web import create_app
from tasks.engine import pg
from tasks.settings import get_settings
from tests.integration.test_code_routes import _auth


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()
    pgpool.pool.resize(get_settings().web_db_connections)
    pgpool.pool.discard_idle()


def test_a_workers_slow_statement_is_cut_at_its_time_limit(db, limits) -> None:
    limits.setenv("SWITCHYARD_WORKER_STATEMENT_TIMEOUT_SECONDS", "0.5")
    get_settings.cache_clear()
    with pg.connect() as conn:
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT pg_sleep(10)")
        assert time.monotonic() - started < 3
        shown = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in (
            "statement_timeout", "idle_in_transaction_session_timeout", "tcp_keepalives_idle")}
    assert shown == {"statement_timeout": "500ms", "idle_in_transaction_session_timeout": "1min",
                     "tcp_keepalives_idle": "30"}


def test_the_webs_connections_carry_the_webs_limit(db, limits) -> None:
    limits.setenv("SWITCHYARD_WEB_STATEMENT_TIMEOUT_SECONDS", "0.25")
    get_settings.cache_clear()
    pgpool.pool.discard_idle()
    create_app()
    conn = pgpool.pool.borrow()
    try:
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "250ms"
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT pg_sleep(5)")
    finally:
        pgpool.pool.give_back(conn)


def test_a_request_that_finds_every_connection_lent_is_a_503(db, limits) -> None:
    # Given a web process of two connections, both held by slow work
    limits.setenv("SWITCHYARD_WEB_DB_CONNECTIONS", "2")
    limits.setenv("SWITCHYARD_WEB_DB_WAIT_SECONDS", "0.3")
    get_settings.cache_clear()
    client = create_app().test_client()
    auth = _auth("alice")
    held = []
    while True:  # (another test's event hub may hold one of them for its life)
        try:
            held.append(pgpool.pool.borrow())
        except pgpool.PoolBusy:
            break
    try:
        # When a request comes (from a thread of its own, as a web request does: this test's
        # thread may hold a connection an earlier test's engine call borrowed)
        started = time.monotonic()
        with ThreadPoolExecutor(1) as ex:
            busy = ex.submit(client.get, "/api/projects", headers=auth).result()
        # Then it is answered 503 with Retry-After after the short wait, not queued
        assert time.monotonic() - started < 2
        assert busy.status_code == 503, busy.json
        assert busy.json["error"]["code"] == "database_busy"
        assert busy.headers["Retry-After"] == "1"
    finally:
        for conn in held:
            pgpool.pool.give_back(conn)
    assert client.get("/api/projects", headers=auth).status_code == 200
