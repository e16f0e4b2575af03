"""The web process's hot-path reads: a small bounded pool of autocommit connections.

`tasks.pg` gives each thread its own persistent connection, which suits a
worker's few threads; a gthread web process has up to --threads of them, and an
SSE stream holds its thread for its whole life. Reads on every request (the
token lookup) or every stream (the replay) go through this pool instead: at
most SIZE connections, borrowed per statement, each statement a server-side
prepared one with no BEGIN/ROLLBACK around it, so one round trip per read and no
ORM session (bench/http_latency.py: ~20 % less web CPU per enqueue request than
the same reads through a SQLAlchemy session).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg

from tasks import pg

SIZE = 10


class Pool:
    def __init__(self, size: int) -> None:
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def fetch(self, sql: str, params: pg.Params = None) -> list[tuple[Any, ...]]:
        with self._slots:
            with self._lock:
                if self._pid != os.getpid():  # forked: the parent's connections are not ours
                    self._idle, self._pid = [], os.getpid()
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                conn = pg.connect()
            try:
                cur = conn.execute(sql, params)  # type: ignore[arg-type]
                result = cur.pgresult
                return (cur.fetchall()
                        if result is not None and result.status == pg.TUPLES_OK else [])
            except psycopg.OperationalError:
                conn.close()
                raise
            finally:
                if not conn.closed:
                    with self._lock:
                        self._idle.append(conn)


pool = Pool(SIZE)


def fetch(sql: str, params: pg.Params = None) -> list[tuple[Any, ...]]:
    return pool.fetch(sql, params)


def fetch_one(sql: str, params: pg.Params = None) -> tuple[Any, ...] | None:
    rows = pool.fetch(sql, params)
    return rows[0] if rows else None
