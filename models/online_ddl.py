"""Index and constraint changes a migration can make while the application keeps writing.

A plain `CREATE INDEX` holds a SHARE lock on the table for the whole build (it reads every
row), and a plain `DROP INDEX` asks for ACCESS EXCLUSIVE: while either waits or runs, every
enqueue, claim and checkpoint on that table queues behind it. The CONCURRENTLY forms take
SHARE UPDATE EXCLUSIVE, which writers do not conflict with. They cannot run inside a
transaction, so each runs in alembic's autocommit block (the migration's earlier statements
are committed first: keep these at the end of a migration's upgrade).

Each is safe to run again after a failure half-way (a cancelled concurrent build leaves an
INVALID index behind under its name): a name this migration creates is dropped first if it
is there, and a drop says IF EXISTS. They wait as long as they must: a migration's other
statements give up on a lock after SWITCHYARD_MIGRATION_LOCK_TIMEOUT_SECONDS (alembic/env.py),
because a plain lock request holds every writer while it waits, which these do not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from alembic import op


@contextmanager
def _autocommit() -> Iterator[None]:
    """Alembic's autocommit block, without the migration's lock timeout (alembic/env.py): a
    concurrent build or drop waits for the transactions open when it starts and blocks no
    writer meanwhile, so it may wait; given up on, a build of a big table would be lost."""
    with op.get_context().autocommit_block():
        op.execute("SET lock_timeout = 0")
        yield  # (a failure ends the migration: nothing to reset, and its error is the one told)
        op.execute("RESET lock_timeout")


def create_index(name: str, table: str, columns: str, where: str | None = None, *,
                 unique: bool = False) -> None:
    """`CREATE [UNIQUE] INDEX CONCURRENTLY name ON table columns [WHERE where]`, replacing a
    leftover."""
    predicate = f" WHERE {where}" if where else ""
    kind = "UNIQUE INDEX" if unique else "INDEX"
    with _autocommit():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(f"CREATE {kind} CONCURRENTLY {name} ON {table} {columns}{predicate}")


def drop_index(name: str) -> None:
    with _autocommit():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def _is_valid(name: str) -> bool:
    """A valid index of that name in the schema the migration writes to (offline, `alembic
    upgrade --sql`, there is no database to ask: no)."""
    if op.get_context().as_sql:
        return False
    return bool(op.get_bind().exec_driver_sql(
        "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.oid = to_regclass(%(name)s) AND i.indisvalid)", {"name": name}).scalar())


def replace_index(name: str, table: str, columns: str, where: str | None = None) -> None:
    """Build the new definition under a temporary name, then swap: the old index serves
    reads until the new one is valid, and no step blocks the table's writers. A run stopped
    after the build keeps what it built (a valid `<name>_next` is only ever this migration's:
    alembic runs it again only while its revision is not stamped)."""
    building = f"{name}_next"
    if not _is_valid(building):
        create_index(building, table, columns, where)
    drop_index(name)
    with _autocommit():
        # Renaming an index takes SHARE UPDATE EXCLUSIVE on the index only (PostgreSQL 12+).
        op.execute(f"ALTER INDEX {building} RENAME TO {name}")


def validate_constraint(table: str, name: str) -> None:
    """Check a constraint added NOT VALID over the rows already there. The check takes SHARE
    UPDATE EXCLUSIVE, which writers pass; the constraint held every new row meanwhile."""
    with _autocommit():
        op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def replace_primary_key(table: str, columns: str) -> None:
    """Make `columns` the table's primary key (`<table>_pkey`) without building it under a
    lock: its unique index is built concurrently (kept when valid from a run stopped after
    the build), then the constraints are swapped in one ALTER, ACCESS EXCLUSIVE for a
    catalog change only (the columns are NOT NULL already, so nothing is scanned). The ALTER
    runs in the migration's own transaction, under its lock timeout, and is stamped with it.
    Nothing may reference the old key by a foreign key (it is dropped, not cascaded)."""
    name = f"{table}_pkey"
    building = f"{name}_next"
    if not _is_valid(building):
        create_index(building, table, columns, unique=True)
    op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}, "
               f"ADD CONSTRAINT {name} PRIMARY KEY USING INDEX {building}")
