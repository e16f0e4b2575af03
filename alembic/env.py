"""Alembic environment: the URL comes from DATABASE_URL (or an explicit config option)."""

import time
from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool

from models import Base
from models.schema import managed_by_migrations
from tasks.settings import read_settings, sqlalchemy_url

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata
# Read afresh, not cached (tasks.settings.read_settings), once per alembic command.
settings = read_settings()


def database_url() -> str:
    return sqlalchemy_url(config.get_main_option("sqlalchemy.url") or settings.database_url)


def _include_name(name, type_, parent_names) -> bool:
    """Autogenerate leaves the event log's daily partitions alone: they are made at run time."""
    return type_ != "table" or managed_by_migrations(name)


# Migrations of one database run one at a time (every replica of a release may run them):
# two at once would build and drop each other's indexes (models.online_ddl).
MIGRATION_LOCK = 0x5357_4D49  # "SWMI"


def run_migrations_offline() -> None:
    context.configure(url=database_url(), target_metadata=target_metadata, literal_binds=True,
                      transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # A statement waiting for a table's lock holds every writer queued behind its request: it
    # gives up after the lock timeout instead (app.ops.migrations asks again, and says who
    # holds the lock). Set for the session, so that models.online_ddl's concurrent builds,
    # which block no writer while they wait, can lift it and RESET back to it.
    # 0: no timeout, every lock waited for as long as it takes.
    lock_timeout_ms = round(settings.migration_lock_timeout_seconds * 1000)
    engine = create_engine(database_url(), poolclass=pool.NullPool,
                           connect_args={"options": f"-c lock_timeout={lock_timeout_ms}"})
    with engine.connect() as connection:
        # Behind another migrator for as long as it takes (the lock is the session's, held
        # until this connection closes). Asked again and again rather than waited for: a
        # statement waiting would hold a snapshot, which the other's concurrent index build
        # waits to see end (a deadlock).
        while not connection.exec_driver_sql(
                f"SELECT pg_try_advisory_lock({MIGRATION_LOCK})").scalar():
            connection.commit()
            time.sleep(0.5)
        connection.commit()
        # One transaction a migration: one that gives up on a lock leaves those before it done.
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True,
                          include_name=_include_name, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
