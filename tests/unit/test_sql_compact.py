"""The engine's long statements fit psycopg's parse cache (tasks.engine.sql.compact): a query
over the limit is parsed again at every execution, on the hot path of every job."""

from __future__ import annotations

import psycopg._queries

import tasks.catalog  # noqa: F401 - registers every job type
from tasks.engine import enqueue, store
from tasks.engine.sql import PARSE_CACHE_LIMIT, compact


def test_the_limit_is_psycopgs() -> None:
    assert psycopg._queries.MAX_CACHED_STATEMENT_LENGTH == PARSE_CACHE_LIMIT


def test_every_hot_path_statement_fits_the_parse_cache() -> None:
    hot = {"finish": store.FINISHES, "checkpoint": store.CHECKPOINTS,
           "claim": (store.CLAIM_UNKEYED, store.CLAIM_KEYED), "enqueue": (enqueue.INSERT_JOB,)}
    for name, statements in hot.items():
        for statement in statements:
            assert len(statement) <= PARSE_CACHE_LIMIT, (name, len(statement))


def test_compact_drops_indentation_blank_lines_and_comments_but_not_quoted_text() -> None:
    statement = """
        SELECT 'a -- b' AS kept,  -- a comment
            x -- another

        -- a whole line
        FROM t WHERE y = '--'
    """
    assert compact(statement) == "SELECT 'a -- b' AS kept,\nx\nFROM t WHERE y = '--'"
