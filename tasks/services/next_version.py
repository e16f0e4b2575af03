"""Saving the next immutable version of a named thing (a workflow, a function).

The insert takes `max(version) + 1` of the name; two saves at once compute the same number
and the unique (project, name, version) index refuses one. The loser tries again with the
next number, after a short random pause so the racers do not collide in step again: n
racers cost n - 1 retries at worst.
"""

from __future__ import annotations

import random
import time
from typing import Any

import psycopg

from tasks.engine import pg

ATTEMPTS = 50


def insert_next(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """The row `sql` (an INSERT ... RETURNING of the next version) returns, by column name."""
    for attempt in range(ATTEMPTS):
        try:
            row = pg.fetch_one_dict(sql, params)
            assert row is not None
            return row
        except psycopg.errors.UniqueViolation:
            if attempt == ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0, 0.02))
    raise AssertionError("unreachable")
