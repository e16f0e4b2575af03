"""What `supabase.from(table)` may reach: the allow-list of tables and their columns.

A function names tables and columns by these names only; each maps to a fixed SQL
expression here, so no text from the JavaScript ever becomes SQL. `project_id` is never a
column a function can see or filter on: tasks.functions.data adds it to every statement.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tasks.engine.errors import PermanentError
from tasks.engine.storable import to_json

# Column types: how a value given for the column is checked and passed to PostgreSQL.
UUID, TEXT, INT, TIME, JSON = "uuid", "text", "int", "timestamptz", "jsonb"


@dataclass(frozen=True)
class Table:
    source: str  # the SQL table
    columns: dict[str, str]  # name the function uses (= the SQL column) -> type
    writable: bool = False


TABLES: dict[str, Table] = {
    # The functions' own document store: read and write.
    "function_data": Table("function_data", {
        "id": UUID, "collection": TEXT, "doc": JSON, "created_at": TIME, "updated_at": TIME,
    }, writable=True),
    # Read-only views of what the project's agents remember, ran and produced.
    "memory": Table("agent_memory", {
        "category": TEXT, "key": TEXT, "content": TEXT, "created_at": TIME, "updated_at": TIME,
    }),
    "jobs": Table("agent_jobs", {
        "id": UUID, "job_type": TEXT, "status": TEXT, "attempts": INT, "result": JSON,
        "parent_job_id": UUID, "created_at": TIME, "started_at": TIME, "completed_at": TIME,
    }),
    "packets": Table("packets", {
        "id": UUID, "job_id": UUID, "phase": INT, "content": JSON, "created_at": TIME,
    }),
}
WRITABLE_COLUMNS = ("collection", "doc")  # of function_data: the rest is the server's
# `doc->>status` (as text) or `doc->status` (as JSON): one key into a JSON column.
PATH = re.compile(r"([a-z_]+)\s*(->>|->)\s*([A-Za-z0-9_]{1,64})")


class QueryProblem(Exception):
    """What is wrong with a query, in words for the function's author: becomes `error`."""


@dataclass(frozen=True)
class Column:
    """A column reference resolved against a table: its SQL text and its parameters."""
    sql: str
    params: tuple[Any, ...]
    type: str


def table(name: Any) -> Table:
    if not isinstance(name, str) or name not in TABLES:
        raise QueryProblem(f"unknown table {name!r}: functions can use "
                           f"{', '.join(sorted(TABLES))}")
    return TABLES[name]


def column(t: Table, name: Any) -> Column:
    """`name`, or `json_column->key` / `json_column->>key`, resolved against `t`."""
    if not isinstance(name, str):
        raise QueryProblem(f"a column name must be a string, got {name!r}")
    if name in t.columns:
        return Column(f't."{name}"', (), t.columns[name])
    path = PATH.fullmatch(name.strip())
    if path and t.columns.get(path[1]) == JSON:
        return Column(f't."{path[1]}" {path[2]} %s', (path[3],),
                      TEXT if path[2] == "->>" else JSON)
    raise QueryProblem(f"unknown column {name!r} of {_public_name(t)}: it has "
                       f"{', '.join(t.columns)}")


def selected(t: Table, columns: Any) -> list[str]:
    """The plain columns a select asks for ("*", a comma list, or None: all)."""
    if columns is None or (isinstance(columns, str) and columns.strip() in ("", "*")):
        return list(t.columns)
    if not isinstance(columns, str):
        raise QueryProblem(f"select() takes a comma-separated string of columns, "
                           f"got {columns!r}")
    names = [c.strip() for c in columns.split(",")]
    for name in names:
        if name not in t.columns:
            raise QueryProblem(f"unknown column {name!r} of {_public_name(t)}: it has "
                               f"{', '.join(t.columns)}")
    return list(dict.fromkeys(names))


def value_for(kind: str, value: Any, where: str) -> Any:
    """A filter value checked against its column's type, ready to be a query parameter."""
    if value is None:
        raise QueryProblem(f"{where}: null never compares equal in SQL; filter on something "
                           "else")
    if kind == UUID:
        try:
            return uuid.UUID(str(value))
        except ValueError:
            raise QueryProblem(f"{where}: {value!r} is not a uuid") from None
    if kind == INT:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise QueryProblem(f"{where}: {value!r} is not a whole number")
        return int(value)
    if kind == TIME:
        try:
            return datetime.fromisoformat(str(value))
        except ValueError:
            raise QueryProblem(f"{where}: {value!r} is not an ISO 8601 time") from None
    if kind == JSON:
        return storable_json(value, where)
    if isinstance(value, str):
        return checked_text(value, where)
    if isinstance(value, bool | int | float):
        return json.dumps(value)  # what `->>` makes of a JSON number or boolean
    raise QueryProblem(f"{where}: {value!r} is not a string")


def checked_text(value: str, where: str) -> str:
    if "\x00" in value:
        raise QueryProblem(f"{where}: text cannot hold the NUL character")
    return value


DOC_MAX = 256 * 1024  # bytes of JSON per document


def storable_json(value: Any, where: str) -> str:
    # tasks.engine.storable's check (NUL, lone surrogates, NaN), answered as the author's problem.
    try:
        encoded = to_json(value, where)
    except PermanentError as exc:
        raise QueryProblem(str(exc)) from None
    if len(encoded) > DOC_MAX:
        raise QueryProblem(f"{where}: {len(encoded)} bytes of JSON, over the cap of {DOC_MAX}")
    return encoded


def _public_name(t: Table) -> str:
    return next(name for name, known in TABLES.items() if known is t)
