"""The web process's database connections: one bounded pool of autocommit connections.

`tasks.engine.pg` gives each thread its own persistent connection, which suits a
worker's few threads; a gthread web process has up to --threads of them, and an
SSE stream holds its thread for its whole life. Reads on every request (the
token lookup) or every stream (the replay) go through this pool instead: at
most its size of connections, borrowed per statement, each statement a server-side
prepared one with no BEGIN/ROLLBACK around it, so one round trip per read and no
ORM session (bench/http_latency.py: ~20 % less web CPU per enqueue request than
the same reads through a SQLAlchemy session). The engine's own statements
(enqueue, cancel, diagnosis) and the request's ORM session (app.http.db) borrow one
connection from the same pool for the length of a request (tasks.engine.pg.lend_from),
and the event hub one for its life, so the process never holds more than
SWITCHYARD_WEB_DB_CONNECTIONS connections (default 20), however many threads
gunicorn runs, and a request never more than one.

A connection that sat idle for more than PING_AFTER seconds is pinged before it
is handed out (a busy pool pays nothing; one that idled through a PostgreSQL
restart never hands a dead connection to a request), and a connection error on
any of them drops every idle one, since they went down together.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tasks.engine import pg
from tasks.engine.errors import SwitchyardError
from tasks.settings import get_settings

PING_AFTER = 1.0  # seconds idle before a connection is checked on its way out


class PoolBusy(SwitchyardError):
    """Every connection of the web process is lent: the request is answered 503 at once
    rather than queue behind slow ones (SWITCHYARD_WEB_DB_WAIT_SECONDS)."""

    http_status, code = 503, "database_busy"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"}


class Pool:
    """At most `size` connections, borrowed per statement (reads) or per request (engine.pg)."""

    def __init__(self, size: int) -> None:
        self.size, self._lent = size, 0
        self._free = threading.Condition()
        self._idle: list[tuple[psycopg.Connection, float]] = []  # (connection, idle since)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def resize(self, size: int) -> None:
        """Set the ceiling (at start-up, from the settings); connections out stay out."""
        with self._free:
            self.size = size
            self._free.notify_all()

    def _take_slot(self) -> None:
        wait = get_settings().web_db_wait_seconds
        with self._free:
            if not self._free.wait_for(lambda: self._lent < self.size, timeout=wait):
                raise PoolBusy(f"no database connection came free within {wait:g} s")
            self._lent += 1

    def _release_slot(self) -> None:
        with self._free:
            self._lent -= 1
            self._free.notify()

    def borrow(self) -> psycopg.Connection:
        self._take_slot()
        try:
            with self._lock:
                if self._pid != os.getpid():  # forked: the parent's connections are not ours
                    self._idle, self._pid = [], os.getpid()
                conn, since = self._idle.pop() if self._idle else (None, 0.0)
            if conn is not None and time.monotonic() - since > PING_AFTER and not _alive(conn):
                self.discard_idle()
                conn = None
            if conn is not None and not conn.closed:
                return conn
            return pg.connect(statement_timeout=get_settings().web_statement_timeout_seconds)
        except BaseException:
            self._release_slot()
            raise

    def give_back(self, conn: psycopg.Connection) -> None:
        if not conn.closed and not conn.broken:
            with self._lock:
                self._idle.append((conn, time.monotonic()))
        elif not conn.closed:
            conn.close()
        if conn.broken:
            self.discard_idle()
        self._release_slot()

    def discard_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def fetch_dicts(self, sql: str, params: pg.Params = None) -> list[dict[str, Any]]:
        """Rows by column name, as tasks.engine.pg.fetch_dicts."""
        if pg.borrowed() is not None:  # this request holds one already: never wait for a second
            return pg.fetch_dicts(sql, params)
        conn = self.borrow()
        try:
            cur = conn.cursor(row_factory=dict_row)
            cur.execute(sql, params)  # type: ignore[arg-type]
            result = cur.pgresult
            return cur.fetchall() if result is not None and result.status == pg.TUPLES_OK else []
        except psycopg.OperationalError as exc:
            conn.close()
            if pg.is_connection_error(exc):
                self.discard_idle()
            raise
        finally:
            self.give_back(conn)


def _alive(conn: psycopg.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        conn.close()
        return False


pool = Pool(20)  # resized by app.web from SWITCHYARD_WEB_DB_CONNECTIONS


def fetch_dicts(sql: str, params: pg.Params = None) -> list[dict[str, Any]]:
    return pool.fetch_dicts(sql, params)


def fetch_one_dict(sql: str, params: pg.Params = None) -> dict[str, Any] | None:
    rows = pool.fetch_dicts(sql, params)
    return rows[0] if rows else None


def execute(sql: str, params: pg.Params = None) -> None:
    """A statement whose rows nobody reads."""
    pool.fetch_dicts(sql, params)
