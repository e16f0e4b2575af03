"""Engines and sessions. Callers own the unit of work: nothing here commits for them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str, *, pool_size: int = 5) -> Engine:
    # No pre-ping: a dead connection surfaces as an error the caller retries,
    # instead of costing a round trip on every checkout.
    return create_engine(url, pool_size=pool_size, max_overflow=10, pool_recycle=1800)


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
