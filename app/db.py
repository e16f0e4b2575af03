"""The web process's database: one engine, one session per request, closed before streaming."""

from __future__ import annotations

from functools import lru_cache

from flask import g
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from models.db import make_engine
from tasks.settings import get_settings


@lru_cache(maxsize=1)
def engine() -> Engine:
    return make_engine(get_settings().sqlalchemy_url, pool_size=10, pre_ping=True)


@lru_cache(maxsize=1)
def session_factory() -> sessionmaker[Session]:
    return sessionmaker(engine(), expire_on_commit=False)


def session() -> Session:
    """This request's session (created on first use, closed at teardown)."""
    if "db" not in g:
        g.db = session_factory()()
    return g.db


def close_session(_: BaseException | None = None) -> None:
    s: Session | None = g.pop("db", None)
    if s is not None:
        s.close()
