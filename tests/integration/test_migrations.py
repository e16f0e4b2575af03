"""Migrations: one head, and `upgrade head` on an empty database matches the models."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from app.ops.embedded import scratch_database
from app.ops.migrations import alembic_config
from app.ops.migrations import upgrade as migrate
from models import Base
from models.schema import managed_by_migrations
from tasks.settings import sqlalchemy_url


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
    assert _tables(scratch_url) == set(Base.metadata.tables) | {"alembic_version"}


def test_downgrade_to_base_and_back_up_again(scratch_url):
    migrate(scratch_url)
    command.downgrade(alembic_config(scratch_url), "base")
    assert _tables(scratch_url) == {"alembic_version"}
    migrate(scratch_url)
    assert _diff(scratch_url) == []
