"""Test services: the configured PostgreSQL and Redis, or embedded ones when none are set.

Each test session gets a database of its own, built by Alembic (never create_all),
and a Redis database number of its own.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
from alembic import command
from alembic.config import Config

from app.embedded import embedded_postgres, embedded_redis
from tasks.settings import libpq_url

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Services:
    admin_url: str  # libpq URL of the server's maintenance database
    database_url: str  # the session's own database
    broker_url: str
    stack: contextlib.ExitStack


def _with_dbname(url: str, dbname: str) -> str:
    base, sep, query = url.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{dbname}{sep}{query}"


def migrate(database_url: str) -> None:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", database_url)
    cfg.attributes["configure_logger"] = False
    command.upgrade(cfg, "head")


def start(tmp: Path) -> Services:
    stack = contextlib.ExitStack()
    admin = os.environ.get("DATABASE_URL") or stack.enter_context(embedded_postgres(tmp / "pg"))
    broker = os.environ.get("BROKER_URL") or stack.enter_context(embedded_redis(tmp / "redis"))
    admin = libpq_url(admin)
    name = f"switchyard_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    database_url = _with_dbname(admin, name)
    stack.callback(_drop_database, admin, name)
    migrate(database_url)
    return Services(admin, database_url, broker, stack)


def _drop_database(admin: str, name: str) -> None:
    from tasks import pg

    pg.reset()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
