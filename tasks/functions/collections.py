"""`supabase.from('<any name>')`: a table of the function's own naming, as supabase-js code
expects one (pure: a request in, a Statement out; tasks.functions.data runs it).

A table that is not one of the reserved names (function_data, memory, jobs, packets) is a
collection of the project's documents in `function_data`: a row is a flat object `{id,
created_at, updated_at, ...fields}`, its fields kept in `doc`. Filters, ordering and
projection name fields; a field name is checked against IDENTIFIER and passed as a
parameter, every value as a parameter, so nothing the JavaScript says becomes SQL text.
`eq` on a field is containment (`doc @> {field: value}`), which the GIN index on `doc`
answers; ordering by created_at uses the (project, collection, created_at) index.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from tasks.functions.keys import PART, NewRows, call_key
from tasks.functions.tables import QueryProblem, checked_text, storable_json

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
SERVER_FIELDS = {"id": "uuid", "created_at": "timestamptz", "updated_at": "timestamptz"}
ROW = ("jsonb_build_object('id', t.id, 'created_at', t.created_at, 'updated_at', "
       "t.updated_at) || t.doc")
MAX_ROWS = 1000
MAX_INSERT = 100
COMPARE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


@dataclass
class Query:
    """A collection statement and what the answer keeps of each row."""
    sql: str
    params: list[Any] = field(default_factory=list)
    fields: list[str] | None = None  # the projection (None: every field)
    count: bool = False  # the `count` column is the whole match's count
    writes: bool = False
    grows: bool = False
    # Measured before any row is sent (tasks.functions.data._capped); an insert's or
    # upsert's own WITH cannot be nested there, and its answer is bounded by its arguments.
    capped: bool = True
    # An insert's or upsert's rows: each must come back, else its id was the project's
    # already and the write is rolled back as a duplicate key (tasks.functions.keys).
    new_rows: NewRows | None = None


def name_of(table: Any) -> str:
    if not isinstance(table, str) or not IDENTIFIER.fullmatch(table):
        raise QueryProblem(f"a table name is letters, digits and _ (at most 63), got "
                           f"{table!r}")
    return table


def build(project_id: str, table: str, request: dict[str, Any], seed: str) -> Query:
    op = request.get("op", "select")
    if op == "select":
        return _select(project_id, table, request)
    if op == "insert":
        return _insert(project_id, table, request.get("values"), seed, request)
    if op == "upsert":
        return _upsert(project_id, table, request, seed)
    where, params = _where(project_id, table, request.get("filters"))
    if len(params) == 2:
        raise QueryProblem(f"{op}() needs a filter (.eq(...) and the like): it would touch "
                           "every row")
    fields = _fields(request.get("columns"))
    if op == "delete":
        return Query(f"DELETE FROM function_data t WHERE {where} RETURNING {ROW} AS row",
                     params, fields, writes=True)
    if op == "update":
        doc = _doc(request.get("values"), "update()")
        return Query(f"UPDATE function_data t SET doc = t.doc || %s::jsonb, updated_at = now() "
                     f"WHERE {where} RETURNING {ROW} AS row", [doc, *params], fields,
                     writes=True, grows=True)
    raise QueryProblem(f"unknown operation {op!r}: select, insert, upsert, update or delete")


def _select(project_id: str, table: str, request: dict[str, Any]) -> Query:
    where, params = _where(project_id, table, request.get("filters"))
    order_sql, order_params = _order(request.get("order"))
    limit = MAX_ROWS if request.get("limit") is None else request["limit"]
    offset = request.get("offset") or 0
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 \
                or (name == "limit" and value > MAX_ROWS):
            raise QueryProblem(f"{name} must be a whole number from 0"
                               + (f" to {MAX_ROWS}" if name == "limit" else ""))
    count = request.get("count") == "exact"
    counted = ", count(*) OVER () AS count" if count else ""
    sql = (f'SELECT {ROW} AS row{counted}, row_number() OVER ({order_sql}) AS "__sy_n" '
           f"FROM function_data t WHERE {where} {order_sql} LIMIT %s OFFSET %s")
    return Query(sql, [*order_params, *params, *order_params, limit, offset],
                 _fields(request.get("columns")), count)


def _insert(project_id: str, table: str, values: Any, seed: str,
            request: dict[str, Any]) -> Query:
    rows = values if isinstance(values, list) else [values]
    if not rows or len(rows) > MAX_INSERT:
        raise QueryProblem(f"insert() takes a row or a list of 1 to {MAX_INSERT} rows")
    parts: list[str] = []
    params: list[Any] = []
    keys: list[uuid.UUID] = []
    for n, row in enumerate(rows):
        row_id, doc = _row(row, n, seed)
        keys.append(call_key(seed, n))
        parts.append("(%s, %s, %s, %s::jsonb, %s)")
        params += [row_id, project_id, table, doc, keys[-1]]
    ids: list[uuid.UUID] = params[0::5]
    # The key is (project, id): only the project's own rows conflict. Repeated after a crash,
    # the call finds the rows it made (same seed, same keys) instead of adding them again; a
    # row it did not make is left out, and NewRows.check makes that a duplicate key.
    sql = (f"WITH ins AS (INSERT INTO function_data AS t (id, project_id, collection, doc, "
           f"made_by) VALUES {', '.join(parts)} ON CONFLICT (project_id, id) DO NOTHING "
           f'RETURNING t.*) SELECT {ROW} AS row, array_position(%s, t.id) - 1 AS "{PART}" '
           "FROM (SELECT * FROM ins UNION ALL SELECT * FROM function_data f "
           "WHERE f.project_id = %s AND f.collection = %s AND EXISTS (SELECT 1 FROM "
           "unnest(%s::uuid[], %s::uuid[]) AS k(id, key) WHERE f.id = k.id "
           "AND (f.made_by = k.key OR f.id = k.key)) "
           "AND f.id NOT IN (SELECT id FROM ins)) t ORDER BY array_position(%s, t.id)")
    return Query(sql, [*params, ids, project_id, table, ids, keys, ids],
                 _fields(request.get("columns")), grows=True, capped=False,
                 new_rows=NewRows(table, ids))


def _upsert(project_id: str, table: str, request: dict[str, Any], seed: str) -> Query:
    """Each row updates the row whose `on_conflict` field (default id) has its value, or is
    inserted; one statement, so all or none."""
    values = request.get("values")
    rows = values if isinstance(values, list) else [values]
    if not rows or len(rows) > MAX_INSERT:
        raise QueryProblem(f"upsert() takes a row or a list of 1 to {MAX_INSERT} rows")
    key = request.get("on_conflict") or "id"
    if not isinstance(key, str) or not IDENTIFIER.fullmatch(key) or key in (
            "created_at", "updated_at"):
        raise QueryProblem(f"onConflict names one field, got {key!r}")
    ctes: list[str] = []
    selects: list[str] = []
    params: list[Any] = []
    ids: list[uuid.UUID] = []
    for n, row in enumerate(rows):
        row_id, doc = _row(row, n, seed)
        ids.append(row_id)
        match_params: list[Any]
        if key == "id":
            match, match_params = "t.id = %s", [row_id]  # the row's own id, or its seed's
        else:
            if key not in row:
                raise QueryProblem(f"row {n}: upsert on {key} needs the row's {key}")
            match, match_params = "t.doc -> %s = %s::jsonb", [key, _json(row[key])]
        ctes.append(f"u{n} AS (UPDATE function_data t SET doc = t.doc || %s::jsonb, "
                    f"updated_at = now() WHERE t.project_id = %s AND t.collection = %s "
                    f"AND {match} RETURNING t.*)")
        params += [doc, project_id, table, *match_params]
        # Not matched, the row is inserted; its id taken in the project (in another table of
        # it, or by a concurrent insert) leaves both CTEs empty: a duplicate key (NewRows).
        ctes.append(f"i{n} AS (INSERT INTO function_data AS t (id, project_id, collection, "
                    f"doc, made_by) SELECT %s, %s, %s, %s::jsonb, %s WHERE NOT EXISTS "
                    f"(SELECT 1 FROM u{n}) ON CONFLICT (project_id, id) DO NOTHING "
                    "RETURNING t.*)")
        params += [row_id, project_id, table, doc, call_key(seed, n)]
        selects += [f'SELECT {ROW} AS row, {n} AS "{PART}" FROM {cte}{n} t'
                    for cte in ("u", "i")]
    sql = f"WITH {', '.join(ctes)} {' UNION ALL '.join(selects)}"
    return Query(sql, params, _fields(request.get("columns")), writes=True, grows=True,
                 capped=False, new_rows=NewRows(table, ids))


def _row(row: Any, n: int, seed: str) -> tuple[uuid.UUID, str]:
    if not isinstance(row, dict):
        raise QueryProblem(f"row {n}: a row must be an object")
    given = row.get("id")
    row_id = _uuid(given, n) if given is not None else call_key(seed, n)
    return row_id, _doc({k: v for k, v in row.items() if k not in SERVER_FIELDS}, f"row {n}")


def _doc(values: Any, where: str) -> str:
    if not isinstance(values, dict):
        raise QueryProblem(f"{where}: the values must be an object of fields")
    for name in values:
        if not IDENTIFIER.fullmatch(name):
            raise QueryProblem(f"{where}: {name!r} is no field name (letters, digits, _)")
        if name in SERVER_FIELDS:
            raise QueryProblem(f"{where}: {name} is set by the server")
    return storable_json(values, where)


def _uuid(value: Any, n: int) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise QueryProblem(f"row {n}: id must be a uuid, got {value!r}") from None


def _fields(columns: Any) -> list[str] | None:
    if columns is None or (isinstance(columns, str) and columns.strip() in ("", "*")):
        return None
    if not isinstance(columns, str):
        raise QueryProblem(f"select() takes a comma-separated string of fields, got "
                           f"{columns!r}")
    names = [c.strip() for c in columns.split(",")]
    for name in names:
        if not IDENTIFIER.fullmatch(name):
            raise QueryProblem(f"select(): {name!r} is no field name")
    return list(dict.fromkeys(names))


def _order(asked: Any) -> tuple[str, list[Any]]:
    if asked is None:
        return "ORDER BY t.created_at, t.id", []
    if not isinstance(asked, dict):
        raise QueryProblem("order must be {column, ascending}")
    name = asked.get("column")
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise QueryProblem(f"order(): {name!r} is no field name")
    direction = "ASC" if asked.get("ascending", True) is not False else "DESC"
    if name in SERVER_FIELDS:
        return f"ORDER BY t.{name} {direction}, t.id", []
    return f"ORDER BY t.doc -> %s {direction} NULLS LAST, t.created_at, t.id", [name]


def _where(project_id: str, table: str, filters: Any) -> tuple[str, list[Any]]:
    clauses: list[str] = ["t.project_id = %s", "t.collection = %s"]
    params: list[Any] = [project_id, table]
    if filters is None:
        filters = []
    if not isinstance(filters, list):
        raise QueryProblem("filters must be a list of [operator, field, value]")
    for f in filters:
        if not (isinstance(f, list) and len(f) == 3):
            raise QueryProblem(f"a filter must be [operator, field, value], got {f!r}")
        op, name, value = f
        if op == "or":
            sql, more = _or(value)
        else:
            sql, more = _filter(op, name, value)
        clauses.append(sql)
        params += more
    return " AND ".join(clauses), params


def _filter(op: Any, name: Any, value: Any) -> tuple[str, list[Any]]:
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise QueryProblem(f"{op}(): {name!r} is no field name")
    if name in SERVER_FIELDS:
        return _server_filter(op, name, value)
    if op == "eq":
        if value is None:
            return "(t.doc -> %s IS NULL OR jsonb_typeof(t.doc -> %s) = 'null')", [name, name]
        if isinstance(value, dict | list):
            return "t.doc -> %s = %s::jsonb", [name, _json(value)]
        return "t.doc @> %s::jsonb", [_json({name: value})]  # the GIN index answers it
    if op == "neq":
        return "t.doc -> %s <> %s::jsonb", [name, _json(value)]
    if op in COMPARE:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise QueryProblem(f"{op}(): compare with a number or a string")
        if isinstance(value, str):
            return f"t.doc ->> %s {COMPARE[op]} %s", [name, checked_text(value, op)]
        return (f"(CASE WHEN jsonb_typeof(t.doc -> %s) = 'number' THEN (t.doc ->> %s)::numeric "
                f"END) {COMPARE[op]} %s", [name, name, value])
    if op in ("like", "ilike"):
        if not isinstance(value, str):
            raise QueryProblem(f"{op}(): the pattern must be a string")
        return (f"t.doc ->> %s {'LIKE' if op == 'like' else 'ILIKE'} %s",
                [name, checked_text(value.replace("*", "%"), op)])
    if op == "in":
        if not isinstance(value, list) or len(value) > MAX_ROWS:
            raise QueryProblem(f"in(): give a list of at most {MAX_ROWS} values")
        return "t.doc -> %s = ANY(%s::jsonb[])", [name, [_json(v) for v in value]]
    if op == "is":
        if value is None:
            return "(t.doc -> %s IS NULL OR jsonb_typeof(t.doc -> %s) = 'null')", [name, name]
        if isinstance(value, bool):
            return "t.doc -> %s = %s::jsonb", [name, _json(value)]
        raise QueryProblem("is() takes null, true or false")
    if op == "contains":
        return "t.doc -> %s @> %s::jsonb", [name, _json(value)]
    raise QueryProblem(f"unknown filter {op!r}: eq, neq, gt, gte, lt, lte, like, ilike, in, is, "
                       "contains, or")


def _server_filter(op: Any, name: str, value: Any) -> tuple[str, list[Any]]:
    cast = SERVER_FIELDS[name]
    if op in ("eq", "neq", *COMPARE):
        if not isinstance(value, str):
            raise QueryProblem(f"{op}(): {name} compares with a string")
        sign = {"eq": "=", "neq": "<>", **COMPARE}[op]
        if cast == "uuid":
            try:
                uuid.UUID(value)
            except ValueError:
                raise QueryProblem(f"{op}(): id must be a uuid") from None
        return f"t.{name} {sign} %s::{cast}", [value]
    if op == "in" and isinstance(value, list) and name == "id":
        try:
            return "t.id = ANY(%s::uuid[])", [[str(uuid.UUID(str(v))) for v in value]]
        except ValueError:
            raise QueryProblem("in(): every id must be a uuid") from None
    raise QueryProblem(f"{op}() is not for {name}")


OR_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,62})\.(eq|neq|gt|gte|lt|lte|like|ilike|is)\."
                     r"(.*)", re.DOTALL)


def _or(text: Any) -> tuple[str, list[Any]]:
    """supabase's `.or('a.eq.1,b.gt.2')`: each part as its filter, the values as PostgREST
    reads them (a number where one is written, null/true/false, else text)."""
    if not isinstance(text, str) or not text or len(text) > 4000:
        raise QueryProblem("or() takes a filter string such as 'status.eq.open,score.gt.3'")
    clauses: list[str] = []
    params: list[Any] = []
    for part in text.split(","):
        m = OR_PART.fullmatch(part.strip())
        if m is None:
            raise QueryProblem(f"or(): {part!r} is not field.operator.value")
        name, op, raw = m.groups()
        sql, more = _filter(op, name, _postgrest_value(raw, op))
        clauses.append(sql)
        params += more
    return "(" + " OR ".join(clauses) + ")", params


def _postgrest_value(raw: str, op: str) -> Any:
    if raw in ("null", "true", "false"):
        return json.loads(raw)
    if op not in ("like", "ilike"):
        try:
            number = float(raw)
        except ValueError:
            return raw
        if not math.isfinite(number):
            return raw  # NaN and Infinity are no JSON numbers: compared as text
        return int(number) if number.is_integer() and "." not in raw else number
    return raw


def _json(value: Any) -> str:
    return json.dumps(value, allow_nan=False)


def project(row: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """The fields a select asked for, in its order (a missing one as null, as PostgREST)."""
    return row if fields is None else {f: row.get(f) for f in fields}
