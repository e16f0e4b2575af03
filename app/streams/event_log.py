"""A stream's stored events read in bounded pages: the replay before live events, where a
`?tail=N` window starts, and older pages on demand. Never a whole history in memory.

Every read is one keyset query on the (project_id, id) or (job_id, id) index, on a
connection borrowed from the web process's bounded pool and given back at once:
`tasks.engine.pg`'s connection is per thread and stays open with it, and a stream holds its
thread for its whole life, so N open streams would otherwise hold N idle database
connections (100 subscribers exhausted PostgreSQL's default max_connections in
bench/http_latency.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from app.http import pgpool
from app.streams.hub import EVENT_COLUMNS, Event, Subscription

REPLAY_PAGE = 500   # events read per query while a stream replays
MAX_TAIL = 1000     # the largest `?tail=` window
MAX_PAGE = 500      # the largest page of older events
TYPE_SCAN = 5000    # events a page filtered by type looks through at most


def _subject(sub: Subscription) -> tuple[str, uuid.UUID | None]:
    return ("job_id", sub.job_id) if sub.job_id else ("project_id", sub.project_id)


def replay(sub: Subscription, after: int, upto: int) -> Iterator[Event]:
    """Stored events matching `sub` with after < id <= upto, in id order, a page at a time."""
    column, value = _subject(sub)
    while True:
        rows = pgpool.fetch_dicts(f"SELECT {EVENT_COLUMNS} FROM agent_job_events "
                                  f"WHERE {column} = %s AND id > %s AND id <= %s "
                                  "ORDER BY id LIMIT %s", (value, after, upto, REPLAY_PAGE))
        for row in rows:
            e = Event(**row)
            after = e.id
            yield e
        if len(rows) < REPLAY_PAGE:
            return


def newest() -> int:
    """The id of the newest stored event, of any project (0: none)."""
    row = pgpool.fetch_one_dict("SELECT COALESCE(max(id), 0) AS id FROM agent_job_events")
    return int(row["id"]) if row else 0


def tail_cursor(sub: Subscription, n: int) -> int:
    """The cursor from which a stream replays the last `n` stored events of `sub`
    (0: none of them, only what comes next)."""
    column, value = _subject(sub)
    if n == 0:
        row = pgpool.fetch_one_dict(f"SELECT COALESCE(max(id), 0) AS cursor "
                                    f"FROM agent_job_events WHERE {column} = %s", (value,))
    else:
        row = pgpool.fetch_one_dict(f"SELECT COALESCE(min(id) - 1, 0) AS cursor FROM (SELECT id "
                                    f"FROM agent_job_events WHERE {column} = %s ORDER BY id DESC "
                                    "LIMIT %s) AS recent", (value, n))
    return int(row["cursor"]) if row else 0


def older(sub: Subscription, before: int | None, limit: int,
          types: list[str] | None = None) -> tuple[list[Event], int | None]:
    """Up to `limit` events of `sub` below `before` (None: the newest), newest first, and
    the `before` of the next page (None when there is no older event).

    With `types`, a page looks at most TYPE_SCAN events (the index knows no types): a type
    that never occurs must not walk a project's whole history per request. A page may
    then hold fewer than `limit` events and still name a next one, where the scan stopped.
    """
    column, value = _subject(sub)
    where = [f"{column} = %s"]
    params: list[object] = [value]
    if before is not None:
        where.append("id < %s")
        params.append(before)
    scope = f"FROM agent_job_events WHERE {' AND '.join(where)}"
    if not types:
        rows = pgpool.fetch_dicts(f"SELECT {EVENT_COLUMNS} {scope} ORDER BY id DESC LIMIT %s",
                                  (*params, limit + 1))
        events = [Event(**r) for r in rows[:limit]]
        return events, events[-1].id if len(rows) > limit else None
    rows = pgpool.fetch_dicts(
        f"SELECT {EVENT_COLUMNS} FROM (SELECT {EVENT_COLUMNS} {scope} ORDER BY id DESC "
        f"LIMIT {TYPE_SCAN}) scanned WHERE type = ANY(%s) ORDER BY id DESC LIMIT %s",
        (*params, types, limit + 1))
    events = [Event(**r) for r in rows[:limit]]
    if len(rows) > limit:
        return events, events[-1].id
    scanned = pgpool.fetch_one_dict(
        f"SELECT count(*) AS seen, min(id) AS lowest FROM (SELECT id {scope} ORDER BY id DESC "
        f"LIMIT {TYPE_SCAN}) scanned", tuple(params)) or {"seen": 0, "lowest": None}
    return events, (scanned["lowest"] if scanned["seen"] >= TYPE_SCAN else None)
