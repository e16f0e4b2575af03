"""The hot path's database access: one persistent psycopg connection per thread.

Autocommit plus single-statement CTEs means one round trip is one commit, and
`prepare_threshold=0` makes every statement a server-side prepared statement
from its first use. A broken connection is dropped and the error re-raised;
the next call reconnects.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg.pq import ExecStatus
from psycopg.rows import dict_row

from tasks.settings import get_settings

log = logging.getLogger(__name__)
T = TypeVar("T")

_local = threading.local()
# Connections inherited across fork() must not be closed by the child (that
# would end the parent's session), so they are parked here instead.
_inherited: list[psycopg.Connection] = []

Params = dict[str, Any] | Sequence[Any] | None
TUPLES_OK = ExecStatus.TUPLES_OK


class Lender(Protocol):
    def borrow(self) -> psycopg.Connection: ...

    def give_back(self, conn: psycopg.Connection) -> None: ...


# A worker keeps one connection per thread for good. A web process has up to
# --threads request threads, so it installs a bounded lender instead: a thread
# borrows on first use and gives the connection back at the end of its request.
_lender: Lender | None = None


def lend_from(lender: Lender | None) -> None:
    global _lender
    _lender = lender


def release() -> None:
    """Give back a borrowed connection (the end of a web request); a no-op otherwise."""
    if getattr(_local, "borrowed", False) and _lender is not None:
        conn, _local.conn, _local.borrowed = _local.conn, None, False
        if conn is not None:
            _lender.give_back(conn)


def borrowed() -> psycopg.Connection | None:
    """This thread's borrowed connection, if it holds one."""
    return _local.conn if getattr(_local, "borrowed", False) else None


def connect(url: str | None = None, *,
            statement_timeout: float | None = None) -> psycopg.Connection:
    """A new autocommit connection. `statement_timeout`: seconds one statement may run
    (default: a worker's, SWITCHYARD_WORKER_STATEMENT_TIMEOUT_SECONDS; 0: none)."""
    settings = get_settings()
    if statement_timeout is None:
        statement_timeout = settings.worker_statement_timeout_seconds
    return psycopg.connect(
        url or settings.libpq_url, autocommit=True, prepare_threshold=0,
        application_name=f"switchyard-{os.getpid()}",
        options=session_options(statement_timeout, settings.idle_in_transaction_timeout_seconds),
        **client_timeouts(settings.db_connect_timeout_seconds,
                          settings.db_tcp_user_timeout_seconds),
    )


def client_timeouts(connect: float, tcp_user: float) -> dict[str, Any]:
    """The client's side of a silent peer (a cut network, a host gone): a connection attempt
    gives up after `connect` seconds, a write unacknowledged for `tcp_user` seconds drops the
    connection (0: the kernel's default, ~15 minutes), and keepalives find an idle socket's
    dead peer in about a minute. Every error then is a connection error, retried by
    `persisting` on a fresh connection."""
    return {"connect_timeout": max(1, round(connect)), "tcp_user_timeout": round(tcp_user * 1000),
            "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
            "keepalives_count": 3}


def session_options(statement_timeout: float, idle_in_transaction: float) -> str:
    """The server-side limits every connection sets at start (libpq `options`): statements
    and idle transactions cut by the server, and its own TCP keepalives towards a client
    that vanished, so no slow or abandoned session holds a connection or a lock for long."""
    ms = {"statement_timeout": int(statement_timeout * 1000),
          "idle_in_transaction_session_timeout": int(idle_in_transaction * 1000),
          "tcp_keepalives_idle": 30, "tcp_keepalives_interval": 10, "tcp_keepalives_count": 3}
    return " ".join(f"-c {name}={value}" for name, value in ms.items())


def connection() -> psycopg.Connection:
    conn: psycopg.Connection | None = getattr(_local, "conn", None)
    if conn is not None and getattr(_local, "pid", None) != os.getpid():
        _inherited.append(conn)
        conn = None
    if conn is None or conn.closed:
        if getattr(_local, "borrowed", False):
            release()  # a broken borrowed connection goes back (the lender drops it)
        if _lender is not None:
            conn, _local.borrowed = _lender.borrow(), True
        else:
            conn = connect()
        _local.conn, _local.pid = conn, os.getpid()
    return conn


def reset() -> None:
    """Forget this thread's connection (after an error, or in tests after a database restart)."""
    conn: psycopg.Connection | None = getattr(_local, "conn", None)
    if conn is not None and getattr(_local, "pid", None) == os.getpid():
        conn.close()
    if getattr(_local, "borrowed", False):
        release()
    _local.conn = None


@contextmanager
def transaction() -> Iterator[psycopg.Connection]:
    """An explicit multi-statement transaction on this thread's connection."""
    conn = connection()
    try:
        with conn.transaction():
            yield conn
    except psycopg.OperationalError:
        reset()
        raise


def as_dict(cur: psycopg.Cursor) -> dict[str, Any] | None:
    """The cursor's next row by column name (None when there is none)."""
    if cur.pgresult is None or cur.pgresult.status != TUPLES_OK:
        return None
    row = cur.fetchone()
    return None if row is None else dict(zip([c.name for c in cur.description or ()], row,
                                             strict=True))


def fetch_dicts(sql: str, params: Params = None) -> list[dict[str, Any]]:
    """Rows by column name: callers never index a row by position."""
    try:
        cur = connection().cursor(row_factory=dict_row)
        cur.execute(sql, params)  # type: ignore[arg-type]
        result = cur.pgresult
        return cur.fetchall() if result is not None and result.status == TUPLES_OK else []
    except psycopg.OperationalError:
        reset()
        raise


def fetch_one_dict(sql: str, params: Params = None) -> dict[str, Any] | None:
    rows = fetch_dicts(sql, params)
    return rows[0] if rows else None


def fetch_value(sql: str, params: Params = None) -> Any:
    """The one column of a statement's one row (a count, an id it returned)."""
    row = fetch_one_dict(sql, params)
    if row is None:
        raise LookupError("the statement returned no row")
    if len(row) != 1:
        raise ValueError(f"fetch_value wants one column, the statement returned {list(row)}")
    return next(iter(row.values()))


def execute(sql: str, params: Params = None) -> int:
    """A statement whose rows nobody reads; returns how many rows it touched."""
    try:
        return connection().execute(sql, params).rowcount  # type: ignore[arg-type]
    except psycopg.OperationalError:
        reset()
        raise


def db_now() -> datetime:
    """The database's clock: the one every due time and date key is read from."""
    value: datetime = fetch_value("SELECT now()")
    return value


# SQLSTATE classes of a lost or refused connection (a server restarting, shutting
# down, or not yet accepting): retrying on a new connection can help. Any other
# error (a constraint, bad data, a cancelled statement) is not the connection's.
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")


def first_line(exc: BaseException) -> str:
    """An error's first line, for a one-line log of a fault that needs no traceback."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def is_connection_error(exc: BaseException) -> bool:
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if "does not exist" in str(exc):
        return False  # a dropped database (or role) does not come back by waiting
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(_CONNECTION_STATES)


class DatabaseUnavailable(Exception):
    """The database stayed unreachable for longer than SWITCHYARD_DB_RETRY_SECONDS."""


def persisting(fn: Callable[[], T], *, what: str = "a database write") -> T:
    """Run `fn`, retrying on a fresh connection while the database is unreachable.

    `fn` must be safe to run again after a lost connection: its statement either
    did not commit, or is written to notice that it did (tasks.engine.store's writes).
    """
    deadline = time.monotonic() + get_settings().db_retry_seconds
    delay, failures = 0.05, 0
    while True:
        try:
            result = fn()
            if failures:
                log.warning("database reachable again after %d failed tries", failures,
                            extra={"action": "db_reconnected", "what": what})
            return result
        except psycopg.OperationalError as exc:
            if not is_connection_error(exc):
                raise
            reset()
            failures += 1
            if time.monotonic() + delay > deadline:
                raise DatabaseUnavailable(f"{what}: the database was unreachable for "
                                          f"{get_settings().db_retry_seconds:g}s: {exc}") from exc
            if failures == 1:
                log.warning("database unreachable; retrying %s", what,
                            extra={"action": "db_unreachable", "what": what})
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def persist_one(sql: str, params: Params = None) -> dict[str, Any] | None:
    """One engine statement, by column name, retried while the connection is lost."""
    def run() -> dict[str, Any] | None:
        rows = fetch_dicts(sql, params)
        return rows[0] if rows else None

    return persisting(run)
