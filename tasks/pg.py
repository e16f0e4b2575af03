"""The hot path's database access: one persistent psycopg connection per thread.

Autocommit plus single-statement CTEs means one round trip is one commit, and
`prepare_threshold=0` makes every statement a server-side prepared statement
from its first use. A broken connection is dropped and the error re-raised;
the next call reconnects.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import psycopg
from psycopg.pq import ExecStatus

from tasks.settings import get_settings

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


def connect(url: str | None = None) -> psycopg.Connection:
    return psycopg.connect(
        url or get_settings().libpq_url, autocommit=True, prepare_threshold=0,
        application_name=f"switchyard-{os.getpid()}",
    )


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


def fetch(sql: str, params: Params = None) -> list[tuple[Any, ...]]:
    try:
        cur = connection().execute(sql, params)  # type: ignore[arg-type]
        # Checking the result status, not `cur.description`, which builds column objects.
        result = cur.pgresult
        return cur.fetchall() if result is not None and result.status == TUPLES_OK else []
    except psycopg.OperationalError:
        reset()
        raise


def fetch_one(sql: str, params: Params = None) -> tuple[Any, ...] | None:
    rows = fetch(sql, params)
    return rows[0] if rows else None


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
