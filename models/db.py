"""Engines and sessions. Callers own the unit of work: nothing here commits for them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str, *, pool_size: int = 5, pre_ping: bool = False) -> Engine:
    # pre_ping costs a round trip per checkout; the web process pays it so that a
    # connection that died while PostgreSQL restarted never reaches a request.
    return create_engine(url, pool_size=pool_size, max_overflow=10, pool_recycle=1800,
                         pool_pre_ping=pre_ping)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
