"""Migrations: one head, and `upgrade head` on an empty database matches the models."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from app.ops.embedded import scratch_database
from app.ops.migrations import MigrationBlocked, alembic_config
from app.ops.migrations import upgrade as migrate
from models import Base
from models.schema import managed_by_migrations
from tasks.settings import get_settings, sqlalchemy_url


@pytest.fixture
def scratch_url() -> Iterator[str]:
    """A brand-new empty database on the test server, dropped afterwards."""
    with scratch_database(os.environ["SWITCHYARD_TEST_ADMIN_URL"], "switchyard_mig",
                          migrate=False) as url:
        yield url


def _diff(url: str) -> list:
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={
                "compare_type": True, "compare_server_default": True,
                "include_name": lambda name, type_, _: (type_ != "table"
                                                        or managed_by_migrations(name))})
            return compare_metadata(ctx, Base.metadata)
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine(sqlalchemy_url(url))
    try:
        return {t for t in inspect(engine).get_table_names() if managed_by_migrations(t)}
    finally:
        engine.dispose()


def test_there_is_exactly_one_head():
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, f"several Alembic heads, merge them: {heads}"


def test_every_revision_has_a_real_message():
    for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions():
        assert rev.doc and rev.doc.strip().lower() != "empty message", rev.revision


def test_upgrade_head_on_an_empty_database_matches_the_models(scratch_url):
    migrate(scratch_url)
    assert _diff(scratch_url) == []
    assert _unchecked_constraints(scratch_url) == []  # one added NOT VALID was checked after
    assert _tables(scratch_url) == set(Base.metadata.tables) | {"alembic_version"}


def test_downgrade_to_base_and_back_up_again(scratch_url):
    migrate(scratch_url)
    command.downgrade(alembic_config(scratch_url), "base")
    assert _tables(scratch_url) == {"alembic_version"}
    migrate(scratch_url)
    assert _diff(scratch_url) == []

def _in_thread(target: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    failures: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, failures


def _wait_for_a_lock_wait(monitor: psycopg.Connection, others: set[int]) -> None:
    """Until a backend of the database other than `others` waits for a lock."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = {pid for (pid,) in monitor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'").fetchall()}
        if pids - others:
            return
        time.sleep(0.05)
    raise AssertionError("the migration never waited for the table's lock")


# Each of these migrations changes agent_jobs' indexes, the table every enqueue, claim and
# checkpoint writes. A writer's transaction open when the migration starts (a job's statement
# in flight) stalls the index build; the application's other writes must go on meanwhile. A
# plain CREATE or DROP INDEX would wait for a SHARE or ACCESS EXCLUSIVE lock, and every
# writer would queue behind that request.
@pytest.mark.parametrize(("before", "revision", "indexes"), [
    ("0017", "0018", {"ix_agent_jobs_unpublished", "ix_agent_jobs_holding"}),
    ("0021", "0022", {"ix_agent_jobs_unpublished"}),
    ("0022", "0023", {"ix_agent_jobs_unpublished"}),
])
def test_an_index_migration_lets_the_writers_through(scratch_url, settings_env, before,
                                                    revision, indexes):
    # A concurrent build blocks no writer while it waits, so it waits past the migrations'
    # lock timeout (given up on, a build of a big table would be lost and begun again)
    settings_env(SWITCHYARD_MIGRATION_LOCK_TIMEOUT_SECONDS="0.2",
                 SWITCHYARD_MIGRATION_LOCK_WAIT_SECONDS="0")
    command.upgrade(alembic_config(scratch_url), before)

    with psycopg.connect(scratch_url, autocommit=True) as monitor, \
            psycopg.connect(scratch_url) as holder, \
            psycopg.connect(scratch_url, autocommit=True) as writer:
        holder.execute("UPDATE agent_jobs SET priority = priority")  # ROW EXCLUSIVE, held
        migration, failures = _in_thread(lambda: migrate(scratch_url, revision))
        try:
            _wait_for_a_lock_wait(monitor, {holder.info.backend_pid})
            writer.execute("SET lock_timeout = '3s'")
            writer.execute("UPDATE agent_jobs SET priority = priority")  # ROW EXCLUSIVE
            time.sleep(0.5)  # the build still waiting, past the lock timeout
        finally:
            holder.rollback()
            migration.join(60)
        assert not failures, failures
        assert not migration.is_alive()
        valid = {name for (name,) in monitor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indisvalid AND i.indrelid = 'agent_jobs'::regclass").fetchall()}
        assert indexes <= valid
        assert not {name for name in valid if name.endswith("_next")}
        version = monitor.execute("SELECT version_num FROM alembic_version").fetchone()
        assert version == (revision,)
    migrate(scratch_url)
    assert _diff(scratch_url) == []


def test_a_rebuild_stopped_half_way_can_run_again(scratch_url):
    """A cancelled concurrent build leaves its index behind (INVALID) under the temporary
    name; the next run replaces it instead of failing on the name."""
    command.upgrade(alembic_config(scratch_url), "0021")
    with psycopg.connect(scratch_url, autocommit=True) as conn:
        project = conn.execute("INSERT INTO projects (id, name) VALUES (gen_random_uuid(), "
                               "'p') RETURNING id").fetchone()
        conn.execute("INSERT INTO agent_jobs (id, project_id, job_type, idempotency_key) "
                     "SELECT gen_random_uuid(), %s, 'system.canary', 'k' || g "
                     "FROM generate_series(1, 2) g", project)
        # A concurrent build that fails (here: two rows where it wants one) leaves its
        # index behind, INVALID, as a cancelled one does
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("CREATE UNIQUE INDEX CONCURRENTLY ix_agent_jobs_unpublished_next "
                         "ON agent_jobs (project_id)")
        assert conn.execute("SELECT NOT indisvalid FROM pg_index WHERE indexrelid = "
                            "'ix_agent_jobs_unpublished_next'::regclass").fetchone() == (True,)
    migrate(scratch_url)
    assert _diff(scratch_url) == []


def test_a_swap_stopped_after_the_old_index_went_renames_the_new_one(scratch_url):
    """Stopped between dropping the old index and the rename, the next run keeps the valid
    index it built (no second pass over the table)."""
    command.upgrade(alembic_config(scratch_url), "0022")
    with psycopg.connect(scratch_url, autocommit=True) as conn:
        conn.execute("CREATE INDEX ix_agent_jobs_unpublished_next ON agent_jobs "
                     "(project_id, priority DESC, run_after) "
                     "WHERE (status || '') = 'queued' AND dispatched_at IS NULL")
        conn.execute("DROP INDEX ix_agent_jobs_unpublished")
        built = conn.execute("SELECT 'ix_agent_jobs_unpublished_next'::regclass::oid").fetchone()
        migrate(scratch_url)
        kept = conn.execute("SELECT 'ix_agent_jobs_unpublished'::regclass::oid").fetchone()
    assert kept == built
    assert _diff(scratch_url) == []



# 0020 adds a column to agent_jobs: ACCESS EXCLUSIVE, for a moment once granted. Behind a
# long transaction that has read the table (a report, a console left open) the request waits,
# and every writer queues behind the request: a release stops the application for as long as
# that transaction lives. A migration gives up on a lock after its lock timeout, lets the
# writers by, and asks again.
def test_a_migration_waiting_for_a_lock_lets_the_writers_through(scratch_url, settings_env):
    settings_env(SWITCHYARD_MIGRATION_LOCK_TIMEOUT_SECONDS="0.5")
    command.upgrade(alembic_config(scratch_url), "0019")
    with psycopg.connect(scratch_url, autocommit=True) as monitor, \
            psycopg.connect(scratch_url) as reader, \
            psycopg.connect(scratch_url, autocommit=True) as writer:
        reader.execute("SELECT count(*) FROM agent_jobs")  # ACCESS SHARE, held till it ends
        migration, failures = _in_thread(lambda: migrate(scratch_url))
        try:
            _wait_for_a_lock_wait(monitor, {reader.info.backend_pid})
            writer.execute("SET lock_timeout = '3s'")
            for _ in range(3):  # whichever attempt of the migration's is waiting meanwhile
                writer.execute("UPDATE agent_jobs SET priority = priority")
                time.sleep(0.4)
        finally:
            reader.rollback()
            migration.join(60)
        assert not failures, failures
        assert not migration.is_alive()
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert monitor.execute("SELECT version_num FROM alembic_version").fetchone() == (head,)
    assert _diff(scratch_url) == []


def test_a_migration_that_never_gets_its_lock_names_what_holds_it(scratch_url, settings_env):
    settings_env(SWITCHYARD_MIGRATION_LOCK_TIMEOUT_SECONDS="0.2",
                 SWITCHYARD_MIGRATION_LOCK_WAIT_SECONDS="1.5")
    command.upgrade(alembic_config(scratch_url), "0019")
    with psycopg.connect(scratch_url, autocommit=True) as monitor, \
            psycopg.connect(scratch_url) as bystander, \
            psycopg.connect(scratch_url) as reader:
        # Older, open, and holding no table: not what the migration waits for
        bystander.execute("SELECT now()")
        innocent = bystander.info.backend_pid
        time.sleep(1.1)
        reader.execute("SELECT count(*) FROM agent_jobs")
        holder = reader.info.backend_pid
        with pytest.raises(MigrationBlocked) as blocked:
            migrate(scratch_url)
        # The command says the same, not a traceback
        cli = subprocess.run([sys.executable, "-m", "app.ops.cli", "migrate"],
                             capture_output=True, text=True, timeout=120,
                             env=os.environ | {"DATABASE_URL": scratch_url})
        reader.rollback()
        bystander.rollback()
        # Nothing of the migration that timed out stays; the ones before it are kept
        assert monitor.execute("SELECT version_num FROM alembic_version").fetchone() == ("0019",)
        assert not monitor.execute("SELECT 1 FROM information_schema.columns WHERE "
                                   "table_name = 'agent_jobs' AND column_name = 'rerun_of'"
                                   ).fetchall()
    message = str(blocked.value)
    assert "0020" in message
    assert f"pid {holder} (idle in transaction for " in message
    assert "holding agent_jobs" in message  # the table, read from pg_locks
    assert f"pid {innocent} " not in message
    assert "SWITCHYARD_MIGRATION_LOCK_WAIT_SECONDS" in message
    assert "count(*)" not in message  # what a session runs is never shown: it may hold secrets
    assert cli.returncode == 1
    said = cli.stderr.strip().splitlines()
    assert said[0].startswith("migration 0020 is waiting for a table's lock"), said
    assert said[-1].startswith("Error: migration 0020 waited for a table's lock"), said
    assert f"pid {holder} (idle in transaction for " in said[-1]


def _unchecked_constraints(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [name for (name,) in conn.execute(
            "SELECT conname FROM pg_constraint WHERE NOT convalidated").fetchall()]


def test_a_foreign_key_check_stopped_half_way_can_run_again(scratch_url):
    """0020 adds its column and foreign key NOT VALID (committed), then checks the rows under
    a lock writers pass; stopped between the two, the next run adds nothing twice and checks."""
    command.upgrade(alembic_config(scratch_url), "0019")
    with psycopg.connect(scratch_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE agent_jobs ADD COLUMN rerun_of uuid")
        conn.execute("ALTER TABLE agent_jobs ADD CONSTRAINT agent_jobs_rerun_of_fkey FOREIGN "
                     "KEY (rerun_of) REFERENCES agent_jobs (id) ON DELETE SET NULL NOT VALID")
    assert _unchecked_constraints(scratch_url) == ["agent_jobs_rerun_of_fkey"]
    migrate(scratch_url)
    assert _unchecked_constraints(scratch_url) == []
    assert _diff(scratch_url) == []


def test_migrating_leaves_the_process_settings_unread(scratch_url):
    """A scratch database is migrated, then named in DATABASE_URL for the rest of the process
    (the benches, the coding harness): a migration that cached the settings would leave the
    process on the server's admin database."""
    get_settings.cache_clear()
    migrate(scratch_url)
    assert get_settings.cache_info().currsize == 0


def test_two_migrators_at_once_take_turns(scratch_url):
    """Every replica of a release may run `migrate`: on one database they run one at a time,
    the second finding the work done, instead of racing each other's tables and indexes."""
    # Two processes, as two replicas are (alembic's context is one per process)
    runs = [subprocess.Popen([sys.executable, "-m", "app.ops.cli", "migrate"], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=os.environ | {"DATABASE_URL": scratch_url})
            for _ in range(2)]
    said = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], said
    assert _diff(scratch_url) == []


def _function_data_key(conn: psycopg.Connection) -> list[str]:
    """function_data's primary key columns, in order."""
    return [name for (name,) in conn.execute(
        "SELECT a.attname FROM pg_index i JOIN LATERAL unnest(i.indkey) WITH ORDINALITY "
        "AS k(attnum, n) ON true JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = k.attnum WHERE i.indrelid = 'function_data'::regclass "
        "AND i.indisprimary ORDER BY k.n").fetchall()]


def test_function_data_rows_are_keyed_by_project_and_id_after_0024(scratch_url):
    """0024 keys a function's row by (project, id) over the rows already there (ids unique
    across projects are unique within each), so two projects may then hold the same id."""
    command.upgrade(alembic_config(scratch_url), "0023")
    with psycopg.connect(scratch_url, autocommit=True) as conn:
        a, b = (conn.execute("INSERT INTO projects (id, name) VALUES (gen_random_uuid(), %s) "
                             "RETURNING id", (name,)).fetchone()[0] for name in ("a", "b"))
        conn.execute("INSERT INTO function_data (id, project_id, collection, doc) "
                     "SELECT gen_random_uuid(), %s, 'c', jsonb_build_object('n', g) "
                     "FROM generate_series(1, 50) g", (a,))
        assert _function_data_key(conn) == ["id"]
        migrate(scratch_url, "0024")
        assert _function_data_key(conn) == ["project_id", "id"]
        assert conn.execute("SELECT count(*) FROM function_data").fetchone() == (50,)
        # The same id in two projects; twice in one project, still refused
        [(row,)] = conn.execute("SELECT id FROM function_data LIMIT 1").fetchall()
        conn.execute("INSERT INTO function_data (id, project_id, collection, doc) "
                     "VALUES (%s, %s, 'c', '{}')", (row, b))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO function_data (id, project_id, collection, doc) "
                         "VALUES (%s, %s, 'd', '{}')", (row, a))
        assert not conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE "
                                "'function_data%%_next'").fetchone()[0]
    migrate(scratch_url)
    assert _diff(scratch_url) == []
