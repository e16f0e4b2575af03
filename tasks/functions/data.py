"""The `db` tool: a supabase-style query from a function, run as parameterized SQL.

The request is data ({"table", "op", "columns", "filters", "order", "limit", "values"}); the
statement is built from the allow-list in tasks.functions.tables and fixed SQL text, with
every value a parameter, and always scoped to the running job's project. The answer is
supabase-js's `{"data", "error"}`: a problem with the query is an `error`, not an exception.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from tasks.engine import pg
from tasks.functions import collections
from tasks.functions.keys import PART, DuplicateKey, NewRows, call_key
from tasks.functions.tables import (
    TABLES,
    WRITABLE_COLUMNS,
    QueryProblem,
    Table,
    checked_text,
    column,
    selected,
    storable_json,
    table,
    value_for,
)
from tasks.services import quotas
from tasks.services.quotas import QuotaExceeded

OPERATORS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
MAX_ROWS = 1000  # a select's rows at most (supabase's default cap too)
# An answer's bytes at most (as JSON text, measured by PostgreSQL before any row is sent):
# a select of large documents must not load hundreds of MB into the shared worker.
MAX_ANSWER_BYTES = 1 << 20
_BYTES, _ORDINAL = "__sy_bytes", "__sy_n"  # bookkeeping columns, never shown
MAX_INSERT = 100  # rows per insert
STATEMENT_TIMEOUT_MS = 5000  # one db tool statement at most (the worker's own is a minute)
COLLECTION_MAX = 200
DEFAULT_COLLECTION = "default"


@dataclass
class Statement:
    sql: str
    params: list[Any] = field(default_factory=list)
    # Measured against MAX_ANSWER_BYTES before any row is sent (_capped); an insert's
    # answer is bounded by its own arguments.
    capped: bool = True
    # An update or delete: an answer over the cap rolls the change back, so a function is
    # never told "error" about a write that happened.
    writes: bool = False
    # An insert or update: measured against the owner's quota of bytes after it ran, and
    # rolled back when over (tasks.services.quotas).
    grows: bool = False
    # An insert's or upsert's rows, each to come back in the answer, else a duplicate key
    # and the write is rolled back (tasks.functions.keys).
    new_rows: NewRows | None = None


class _TooBig(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


def run(project_id: uuid.UUID | str, request: Any, *, seed: str) -> dict[str, Any]:
    """Run one query for the project. `seed` makes inserted ids deterministic (the job and
    the call), so an insert repeated after a crash finds its rows instead of adding twins."""
    query: collections.Query | None = None
    try:
        query = _own_table(str(project_id), request, seed)
        statement = Statement(query.sql, query.params, capped=query.capped,
                              writes=query.writes, grows=query.grows,
                              new_rows=query.new_rows) if query \
            else build(str(project_id), request, seed)
        capped = statement.capped
        rows = _measured_write(statement, str(project_id)) \
            if statement.writes or statement.grows else _read(statement)
    except psycopg.errors.QueryCanceled:
        return {"data": None, "error": {"code": "57014", "message": (
            f"the query ran longer than {STATEMENT_TIMEOUT_MS // 1000} s and was stopped "
            "(nothing was changed): filter on fewer rows, or add .limit()")}}
    except QuotaExceeded as over:
        return {"data": None, "error": {"message": f"{over}; nothing was written"}}
    except _TooBig as big:
        return {"data": None, "error": {"message": f"the answer would be {big.size} bytes, "
                                        f"over the {MAX_ANSWER_BYTES} allowed, so nothing was "
                                        "changed: return fewer columns (.select('id'))"}}
    except DuplicateKey as duplicate:
        return {"data": None, "error": duplicate.answer()}
    except QueryProblem as problem:
        return {"data": None, "error": {"message": str(problem)}}
    except (psycopg.DataError, psycopg.IntegrityError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {"data": None, "error": {"message": first}}
    if capped:
        size = rows[0][_BYTES] if rows else 0
        if size > MAX_ANSWER_BYTES:
            return {"data": None, "error": {"message": f"the answer would be {size} bytes, "
                                            f"over the {MAX_ANSWER_BYTES} allowed: select "
                                            "fewer rows or columns (.limit(), .select('id'))"}}
        if not size:
            rows = []  # nothing matched: the one row the outer join made is all nulls
    if query is not None:
        answer: dict[str, Any] = {"data": [collections.project(r["row"], query.fields)
                                           for r in rows], "error": None}
        if query.count:
            answer["count"] = int(rows[0]["count"]) if rows else 0
        return answer
    return {"data": [{k: _plain(v) for k, v in row.items() if k not in (_BYTES, _ORDINAL, PART)}
                     for row in rows], "error": None}


def _own_table(project_id: str, request: Any, seed: str) -> collections.Query | None:
    """The request's statement when it names a table of the function's own (not one of
    the reserved tables)."""
    if not isinstance(request, dict) or request.get("table") in TABLES:
        return None
    return collections.build(project_id, collections.name_of(request.get("table")), request,
                             seed)


def _read(statement: Statement) -> list[dict[str, Any]]:
    with pg.transaction() as conn:
        _time_limit(conn)
        sql = _capped(statement) if statement.capped else (statement.sql, statement.params)
        return conn.cursor(row_factory=dict_row).execute(*sql).fetchall()


def _time_limit(conn: psycopg.Connection) -> None:
    """A function's statement gets seconds, not the worker's minute: the transaction's own
    limit, gone with it."""
    conn.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")


def _measured_write(statement: Statement, project_id: str) -> list[dict[str, Any]]:
    """Run a write in a transaction that is rolled back when its answer is over the cap (the
    rows it changed are only known once it has run) or the owner's data over its quota."""
    with pg.transaction() as conn:
        _time_limit(conn)
        sql = _capped(statement) if statement.capped else (statement.sql, statement.params)
        rows = conn.cursor(row_factory=dict_row).execute(*sql).fetchall()
        size = rows[0][_BYTES] if rows and statement.capped else 0
        if size > MAX_ANSWER_BYTES:
            raise _TooBig(size)
        if statement.new_rows is not None:
            statement.new_rows.check(rows)  # raised here, the transaction rolls back
        if statement.grows:
            quotas.check(quotas.FUNCTION_DATA, project=project_id)
    return rows


def _capped(statement: Statement) -> tuple[str, list[Any]]:
    """`statement` wrapped so PostgreSQL measures its rows first and sends none when they
    exceed MAX_ANSWER_BYTES (then one row whose only value is the size). A data-modifying
    statement in a WITH runs once, however often it is read."""
    ordered = f' ORDER BY q."{_ORDINAL}"' if _ORDINAL in statement.sql else ""
    sql = (f"WITH q AS ({statement.sql}), size AS (SELECT coalesce(sum(octet_length("
           f"row_to_json(q)::text)), 0) AS n FROM q) "
           f'SELECT q.*, size.n AS "{_BYTES}" FROM size LEFT JOIN q ON size.n <= %s{ordered}')
    return sql, [*statement.params, MAX_ANSWER_BYTES]


def build(project_id: str, request: Any, seed: str) -> Statement:
    """The statement a request asks for (pure: no I/O), or QueryProblem."""
    if not isinstance(request, dict):
        raise QueryProblem("a query must be an object")
    t = table(request.get("table"))
    op = request.get("op", "select")
    if op == "select":
        return _select(project_id, t, request)
    if op not in ("insert", "update", "delete"):
        raise QueryProblem(f"unknown operation {op!r}: select, insert, update or delete")
    if not t.writable:
        raise QueryProblem(f"{request['table']} is read-only: functions write to "
                           "function_data only")
    returning = _returning(t, request.get("columns"))
    if op == "insert":
        return _insert(project_id, request.get("values"), seed, returning)
    where = _where(project_id, t, request.get("filters"))
    if len(where.params) == 1:  # the project alone: a whole-table write is never meant
        raise QueryProblem(f"{op}() needs a filter (.eq(...) and the like): it would touch "
                           "every row")
    if op == "delete":
        return Statement(f"DELETE FROM function_data t WHERE {where.sql} RETURNING {returning}",
                         where.params, writes=True)
    sets, params = _assignments(request.get("values"))
    return Statement(f"UPDATE function_data t SET {sets}, updated_at = now() "
                     f"WHERE {where.sql} RETURNING {returning}", params + where.params,
                     writes=True, grows=True)


def _select(project_id: str, t: Table, request: dict[str, Any]) -> Statement:
    columns = ", ".join(f't."{c}" AS "{c}"' for c in selected(t, request.get("columns")))
    where = _where(project_id, t, request.get("filters"))
    order, order_params = "", []
    if (asked := request.get("order")) is not None:
        if not isinstance(asked, dict):
            raise QueryProblem("order must be {column, ascending}")
        col = column(t, asked.get("column"))
        direction = "ASC" if asked.get("ascending", True) is not False else "DESC"
        order, order_params = f"ORDER BY {col.sql} {direction} NULLS LAST", list(col.params)
    # The ordinal keeps the order through _capped's outer query.
    sql = (f'SELECT {columns}, row_number() OVER ({order}) AS "{_ORDINAL}" '
           f"FROM {t.source} t WHERE {where.sql} {order}")
    params = [*order_params, *where.params, *order_params]
    limit = request.get("limit")
    if limit is None:
        limit = MAX_ROWS
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_ROWS:
        raise QueryProblem(f"limit must be a whole number from 0 to {MAX_ROWS}")
    return Statement(f"{sql} LIMIT %s", [*params, limit])


def _where(project_id: str, t: Table, filters: Any) -> Statement:
    clauses: list[str] = ["t.project_id = %s"]
    params: list[Any] = [project_id]
    if filters is None:
        filters = []
    if not isinstance(filters, list):
        raise QueryProblem("filters must be a list of [operator, column, value]")
    for f in filters:
        if not (isinstance(f, list) and len(f) == 3):
            raise QueryProblem(f"a filter must be [operator, column, value], got {f!r}")
        op, name, value = f
        col = column(t, name)
        where = f"{op}({name!r}, …)"
        if op == "in":
            if not isinstance(value, list):
                raise QueryProblem(f"{where}: in() takes a list of values")
            cast = f"::{col.type}[]"
            clauses.append(f"{col.sql} = ANY(%s{cast})")
            params += [*col.params, [value_for(col.type, v, where) for v in value]]
        elif op in OPERATORS:
            clauses.append(f"{col.sql} {OPERATORS[op]} %s::{col.type}")
            params += [*col.params, value_for(col.type, value, where)]
        else:
            raise QueryProblem(f"unknown filter {op!r}: eq, neq, gt, gte, lt, lte or in")
    return Statement(" AND ".join(clauses), params)


def _returning(t: Table, columns: Any) -> str:
    return ", ".join(f't."{c}" AS "{c}"' for c in selected(t, columns))


def _insert(project_id: str, values: Any, seed: str, returning: str) -> Statement:
    rows = values if isinstance(values, list) else [values]
    if not rows or len(rows) > MAX_INSERT:
        raise QueryProblem(f"insert() takes a row or a list of 1 to {MAX_INSERT} rows")
    sql_rows: list[str] = []
    params: list[Any] = []
    for n, row in enumerate(rows):
        collection, doc = _row(row, n)
        row_id = call_key(seed, n)  # never given here: the call's own key, so its made_by
        sql_rows.append("(%s, %s, %s, %s::jsonb, %s)")
        params += [row_id, project_id, collection, doc, row_id]
    # Repeated (a crash before the call was recorded), the rows are found, not added again:
    # their ids are the call's keys. The key is (project, id): only the project's rows
    # conflict. The outer SELECT does not see the CTE's rows (one snapshot): it reads both.
    ids: list[uuid.UUID] = params[0::5]
    return Statement(
        "WITH ins AS (INSERT INTO function_data AS t (id, project_id, collection, doc, made_by) "
        f"VALUES {', '.join(sql_rows)} ON CONFLICT (project_id, id) DO NOTHING RETURNING t.*) "
        f'SELECT {returning}, array_position(%s, t.id) - 1 AS "{PART}" FROM (SELECT * FROM ins '
        "UNION ALL SELECT * FROM function_data WHERE project_id = %s AND id = ANY(%s) "
        "AND id NOT IN (SELECT id FROM ins)) t ORDER BY array_position(%s, t.id)",
        [*params, ids, project_id, ids, ids], capped=False, grows=True,
        new_rows=NewRows("function_data", ids))


def _row(row: Any, n: int) -> tuple[str, str]:
    if not isinstance(row, dict):
        raise QueryProblem(f"row {n}: a row must be an object")
    unknown = set(row) - set(WRITABLE_COLUMNS)
    if unknown:
        raise QueryProblem(f"row {n}: unknown or server-set columns {sorted(unknown)}: a row "
                           "has collection and doc")
    if "doc" not in row:
        raise QueryProblem(f"row {n}: doc is required")
    return _collection(row.get("collection", DEFAULT_COLLECTION), f"row {n}"), \
        storable_json(row["doc"], f"row {n}: doc")


def _collection(value: Any, where: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= COLLECTION_MAX:
        raise QueryProblem(f"{where}: collection must be a string of 1 to {COLLECTION_MAX} "
                           "characters")
    return checked_text(value, where)


def _assignments(values: Any) -> tuple[str, list[Any]]:
    if not isinstance(values, dict) or not values:
        raise QueryProblem("update() takes an object of the columns to set")
    unknown = set(values) - set(WRITABLE_COLUMNS)
    if unknown:
        raise QueryProblem(f"update(): unknown or server-set columns {sorted(unknown)}")
    sets, params = [], []
    if "collection" in values:
        sets.append("collection = %s")
        params.append(_collection(values["collection"], "update()"))
    if "doc" in values:
        sets.append("doc = %s::jsonb")
        params.append(storable_json(values["doc"], "update(): doc"))
    return ", ".join(sets), params


def _plain(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value
