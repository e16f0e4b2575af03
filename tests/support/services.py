"""Test services: the configured PostgreSQL and Redis, or embedded ones when none are set.

Each test session gets a database of its own, built by Alembic (never create_all),
and a Redis database number of its own.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from app.ops.embedded import embedded_postgres, embedded_redis, scratch_database
from tasks.settings import libpq_url

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Services:
    admin_url: str  # libpq URL of the server's maintenance database
    database_url: str  # the session's own database
    broker_url: str
    stack: contextlib.ExitStack


def start(tmp: Path) -> Services:
    stack = contextlib.ExitStack()
    admin = os.environ.get("DATABASE_URL") or stack.enter_context(embedded_postgres(tmp / "pg"))
    broker = os.environ.get("BROKER_URL") or stack.enter_context(embedded_redis(tmp / "redis"))
    database_url = stack.enter_context(scratch_database(admin, "switchyard_test"))
    return Services(libpq_url(admin), database_url, broker, stack)
