"""Alembic, driven from code: `switchyard migrate`, `switchyard up` and the tests use this."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import psycopg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.exc import DBAPIError

from tasks.settings import libpq_url, read_settings

ROOT = Path(__file__).resolve().parents[2]  # the repository (app/ops/migrations.py)

log = logging.getLogger(__name__)


class MigrationBlocked(click.ClickException):
    """A migration asked for a table's lock until its wait ran out: a transaction holds it.
    (`switchyard migrate` and `up` print the message, not a traceback, and exit 1.)"""


def alembic_config(database_url: str | None = None) -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "alembic"))
    if database_url:
        cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


@functools.cache
def _known() -> tuple[str, frozenset[str]]:
    """This code's newest migration, and every migration it knows."""
    script = ScriptDirectory.from_config(alembic_config())
    return str(script.get_current_head()), frozenset(r.revision for r in script.walk_revisions())


def schema_problem(version: str | None) -> str | None:
    """What is wrong with a database at `version` (alembic_version's, None: no such table)
    for this code, or None. A newer migration than this code knows is no problem: during a
    rolling deploy the old processes serve while `release` migrates ahead of them."""
    head, known = _known()
    if version is None:
        return "not migrated: run `switchyard migrate`"
    if version != head and version in known:
        return f"at migration {version}, this code needs {head}: run `switchyard migrate`"
    return None


def database_version(scalar: Callable[[str], Any]) -> str | None:
    """alembic_version's revision, asked through `scalar` (one SQL string → its first value:
    the web's session or doctor's own connection); None when the table does not exist."""
    if scalar("SELECT to_regclass('alembic_version')") is None:
        return None  # (a query naming a missing table fails as it is parsed: asked apart)
    return scalar("SELECT version_num FROM alembic_version LIMIT 1")


def upgrade(database_url: str | None = None, revision: str = "head") -> None:
    """Upgrade to `revision`. A migration statement that waited the lock timeout for a table's
    lock (alembic/env.py) was rolled back and let the writers queued behind it through; that
    migration is asked again, pausing longer each time, for SWITCHYARD_MIGRATION_LOCK_WAIT_SECONDS
    from its first refusal (the migrations before it are committed and stay done)."""
    settings = read_settings()  # not cached: see read_settings
    url = database_url or settings.database_url
    waiting_on, deadline, pause, attempts = "", 0.0, 0.5, 0
    while True:
        try:
            command.upgrade(alembic_config(database_url), revision)
            return
        except DBAPIError as exc:
            if not isinstance(exc.orig, psycopg.errors.LockNotAvailable):
                raise
            blocked, holders = _blocked_on(url)
            if blocked != waiting_on:  # another migration than the last one refused: its own wait
                waiting_on, pause, attempts = blocked, 0.5, 0
                deadline = time.monotonic() + settings.migration_lock_wait_seconds
            attempts += 1
            if time.monotonic() + pause > deadline:
                raise MigrationBlocked(
                    f"migration {blocked} waited for a table's lock {attempts} time(s), "
                    f"{settings.migration_lock_timeout_seconds:g} s each, and gave up: "
                    f"another transaction holds the table. {holders} End that transaction "
                    "(SELECT pg_terminate_backend(<pid>)) and migrate again, or let the "
                    "migration wait longer (SWITCHYARD_MIGRATION_LOCK_WAIT_SECONDS)."
                ) from None
            log.warning("migration %s is waiting for a table's lock, asking again in %.1f s; "
                        "the application's writes go on meanwhile. %s", blocked, pause, holders)
            time.sleep(pause)
            pause = min(pause * 2, 10.0)


# The sessions holding a lock on one of the database's tables (pg_locks: any granted lock
# conflicts with the ACCESS EXCLUSIVE most DDL takes), oldest transaction first, with the
# tables each holds; never the migration's own session or the server's background workers.
# An open transaction that holds no table is not in the way and is not named.
_HOLDERS = """
SELECT a.pid, a.state, date_trunc('second', now() - a.xact_start)::text, a.usename,
       a.application_name, string_agg(DISTINCT c.relname, ', ' ORDER BY c.relname)
FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation AND c.relkind IN ('r', 'p')
JOIN pg_namespace n ON n.oid = c.relnamespace
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND l.locktype = 'relation' AND l.pid <> pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND a.backend_type = 'client backend'
GROUP BY a.pid, a.state, a.xact_start, a.usename, a.application_name
ORDER BY a.xact_start LIMIT 3
"""


def _blocked_on(database_url: str) -> tuple[str, str]:
    """The revision that could not run (the one after the database's), and the sessions
    holding the database's tables: who they are, how long their transaction has been open and
    which tables they hold, never what they run (a statement's text may carry anything). Best
    effort: a failure to look says so rather than hide the lock timeout."""
    try:
        with psycopg.connect(libpq_url(database_url), autocommit=True, connect_timeout=5) as conn:
            stamped = conn.execute("SELECT to_regclass('alembic_version')").fetchone()
            current = (conn.execute("SELECT version_num FROM alembic_version").fetchone()
                       if stamped and stamped[0] else None)
            held = conn.execute(_HOLDERS).fetchall()
    except psycopg.Error as exc:
        return "(unknown)", f"(Could not look at the open transactions: {type(exc).__name__}.)"
    version = current[0] if current else None
    script = ScriptDirectory.from_config(alembic_config())
    following = [rev.revision for rev in script.walk_revisions() if rev.down_revision == version]
    holders = "; ".join(
        f"pid {pid} ({state} for {age}, user {user}"
        + (f", application {app!r}" if app else "") + f", holding {tables})"
        for pid, state, age, user, app, tables in held)
    return (following[0] if following else "head",
            f"Sessions holding the database's tables, oldest transaction first: {holders}."
            if holders else "No other session holds a table now.")
