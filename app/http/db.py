"""The web process's ORM: sessions on the one connection a request borrows (engine.pg,
app.http.pgpool).

A request holds at most one database connection. The engine's statements
(tasks.engine.pg) borrow it from app.http.pgpool on first use and give it back at the end
of the request; the request's ORM session runs on that same connection, so
reading a row through the ORM and then enqueueing, cancelling or deciding never
takes a second connection or waits on a lock the request itself holds. There is
nothing to close before calling the engine.

The connection is in autocommit mode: each ORM statement commits on its own
(one round trip, as the engine's), and a unit of work that must be atomic runs
inside `pg.transaction()`, which the session's statements join. The ORM never
ends a transaction itself (its commit flushes, its rollback forgets): the one
who opened it, tasks.engine.pg, does.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import psycopg
from flask import g
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, Pool

from tasks.engine import pg
from tasks.settings import get_settings


class LentConnectionPool(Pool):
    """SQLAlchemy's view of this thread's tasks.engine.pg connection; it opens and closes nothing.

    One pool record per connection (not per checkout), so the dialect's
    per-connection set-up runs once for each; a connection that died is
    replaced by tasks.engine.pg, and its record with it.
    """

    def __init__(self, creator: Any, **kw: Any) -> None:
        super().__init__(creator, **kw)
        self._records: dict[int, ConnectionPoolEntry] = {}
        self._lock = threading.Lock()

    def _do_get(self) -> ConnectionPoolEntry:
        conn = pg.connection()
        with self._lock:
            record = self._records.get(id(conn))
            if record is None or record.dbapi_connection is not conn:
                self._records = {k: r for k, r in self._records.items()
                                 if r.dbapi_connection is not None
                                 and not r.dbapi_connection.closed}
                record = self._records[id(conn)] = self._create_connection()
        return record

    def _do_return_conn(self, record: ConnectionPoolEntry) -> None:
        pass  # tasks.engine.pg gives the connection back at the end of the request

    def _close_connection(self, connection: Any, *, terminate: bool = False) -> None:
        # not ours: tasks.engine.pg drops a broken connection and app.http.pgpool its idle peers
        pass

    def status(self) -> str:
        return f"LentConnectionPool: {len(self._records)} connections seen"

    def dispose(self) -> None:
        self._records = {}

    def recreate(self) -> LentConnectionPool:
        return self.__class__(self._creator, reset_on_return=None, dialect=self._dialect,
                              _dispatch=self.dispatch)


def _leave_to_tasks_pg(_dbapi_connection: psycopg.Connection) -> None:
    """The ORM's commit and rollback: autocommit has nothing to end, and a
    pg.transaction() block is ended by its owner."""


@lru_cache(maxsize=1)
def engine() -> Engine:
    e = create_engine(get_settings().sqlalchemy_url, poolclass=LentConnectionPool,
                      creator=pg.connection, pool_reset_on_return=None)
    e.dialect.do_commit = _leave_to_tasks_pg  # type: ignore[method-assign]
    e.dialect.do_rollback = _leave_to_tasks_pg  # type: ignore[method-assign]
    return e


@lru_cache(maxsize=1)
def session_factory() -> sessionmaker[Session]:
    return sessionmaker(engine(), expire_on_commit=False)


def session() -> Session:
    """This request's session (created on first use, closed at the end of the request)."""
    if "db" not in g:
        g.db = session_factory()()
    return g.db


def release(_: BaseException | None = None) -> None:
    """End this request's use of the database: its session, then its connection.

    Called at the end of every request, and by a stream before it starts
    (a stream holds its thread for minutes, and borrows per statement)."""
    s: Session | None = g.pop("db", None)
    if s is not None:
        s.close()
    pg.release()
