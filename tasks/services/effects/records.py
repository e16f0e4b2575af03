"""The ledger's rows: read, insert an intent within the daily cap, record or withdraw an outcome.

Each function is one short statement or transaction on this thread's connection;
none is held open across a call to a provider.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from tasks.engine import pg
from tasks.services.effects.policy import CapReached

COLUMNS = ("id, idempotency_key, project_id, approval_id, job_id, action_type, args, status, "
           "provider_ref, response, error, created_at, completed_at")
# What counts towards a daily cap: every effect that did or may have happened.
COUNTED = ("intent", "succeeded", "unknown")


@dataclass(frozen=True)
class EffectRecord:
    id: str
    idempotency_key: str
    project_id: str
    approval_id: str | None
    job_id: str | None
    action_type: str
    args: dict[str, Any]
    status: str
    provider_ref: str | None
    response: Any
    error: str | None
    created_at: datetime
    completed_at: datetime | None


UUIDS = ("id", "project_id", "approval_id", "job_id")


def _record(row: dict[str, Any]) -> EffectRecord:
    # uuids as strings, as the rest of the code passes them around
    values: dict[str, Any] = {k: (None if v is None else str(v)) if k in UUIDS else v
                              for k, v in row.items()}
    return EffectRecord(**values)


def find(key: str) -> EffectRecord | None:
    row = pg.fetch_one_dict(f"SELECT {COLUMNS} FROM action_executions "
                            "WHERE idempotency_key = %s", (key,))
    return None if row is None else _record(row)


def project_settings(project_id: str) -> dict[str, Any] | None:
    row = pg.fetch_one_dict("SELECT settings FROM projects WHERE id = %s", (str(project_id),))
    return None if row is None else (row["settings"] or {})


def insert_intent(*, project_id: str, action_type: str, args: dict[str, Any], key: str,
                  job_id: str | None, approval_id: str | None,
                  cap_per_day: int) -> EffectRecord | None:
    """The committed intent, or None if the key exists already. Raises CapReached.

    The advisory lock on (project, action type) makes count-then-insert atomic
    across workers, so a cap of N never lets N+1 through a race.
    """
    with pg.transaction() as conn:
        cur = conn.cursor(row_factory=dict_row)
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                     (f"effect-cap:{project_id}:{action_type}",))
        counted = cur.execute(
            "SELECT count(*) AS n FROM action_executions "
            "WHERE project_id = %s AND action_type = %s "
            "AND status = ANY(%s) "
            "AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
            (str(project_id), action_type, list(COUNTED)),
        ).fetchone()
        if counted is not None and counted["n"] >= cap_per_day:
            raise CapReached(
                f"this project has reached its cap of {cap_per_day} {action_type} effects "
                f"today (UTC): raise projects.settings.caps.{action_type}_per_day or wait "
                f"until tomorrow", action_type=action_type, cap=cap_per_day)
        row = cur.execute(
            "INSERT INTO action_executions (id, idempotency_key, project_id, approval_id, job_id, "
            "action_type, args, status) VALUES (%s, %s, %s, %s, %s, %s, %s, 'intent') "
            f"ON CONFLICT (idempotency_key) DO NOTHING RETURNING {COLUMNS}",
            (uuid.uuid4(), key, str(project_id), approval_id and str(approval_id),
             job_id and str(job_id), action_type, Jsonb(args)),
        ).fetchone()
    return None if row is None else _record(row)


def record_outcome(effect_id: str, *, status: str, response: Any, provider_ref: str | None,
                   error: str | None) -> EffectRecord | None:
    """Move an intent to its outcome; None if it is no longer an intent."""
    row = pg.fetch_one_dict(
        "UPDATE action_executions SET status = %s, response = %s, provider_ref = %s, "
        "error = %s, completed_at = now() WHERE id = %s AND status = 'intent' "
        f"RETURNING {COLUMNS}",
        (status, None if response is None else Jsonb(response), provider_ref, error, effect_id),
    )
    return None if row is None else _record(row)


def withdraw(effect_id: str) -> None:
    """The provider certainly did not act: forget the intent so a later attempt may call."""
    pg.execute("DELETE FROM action_executions WHERE id = %s AND status = 'intent'", (effect_id,))


def unknown_for(project_id: str, limit: int = 200) -> list[EffectRecord]:
    rows = pg.fetch_dicts(
        f"SELECT {COLUMNS} FROM action_executions WHERE project_id = %s AND status = 'unknown' "
        "ORDER BY created_at, id LIMIT %s",
        (str(project_id), limit),
    )
    return [_record(r) for r in rows]


# A person's verdict: the effect, its approval's execution (succeeded: the action is done) and
# a `log` event on the project's stream, in one transaction. `by` and `note` are kept in the
# response as {"resolution": {...}}; completed_at says when.
RESOLVE = f"""
WITH e AS (
    UPDATE action_executions SET status = %(status)s::text, completed_at = now(),
        response = CASE WHEN jsonb_typeof(response) = 'object' THEN response || %(resolution)s
                        ELSE %(resolution)s END
    WHERE id = %(id)s AND project_id = %(project)s AND status = 'unknown'
    RETURNING {COLUMNS}
), a AS (
    UPDATE approvals SET execution_status =
            CASE WHEN %(status)s::text = 'succeeded' THEN 'completed' ELSE 'failed' END,
        updated_at = now()
    WHERE id = (SELECT approval_id FROM e) AND status = 'approved'
), ev AS (
    INSERT INTO agent_job_events (job_id, project_id, type, message, data)
    SELECT job_id, project_id, 'log',
        action_type || ' effect resolved as ' || status || ' by a person'
            || CASE WHEN %(note)s::text <> '' THEN ': ' || %(note)s::text ELSE '' END,
        jsonb_build_object('effect_id', id, 'kind', action_type, 'outcome', status,
                           'note', %(note)s::text, 'by', %(by)s::text, 'approval_id', approval_id)
    FROM e
)
SELECT {COLUMNS} FROM e
"""


def resolve(effect_id: str, *, project_id: str, status: str, note: str,
            by: str | None) -> EffectRecord | None:
    """Resolve an unknown effect; None if it is not (or no longer) unknown."""
    resolution = Jsonb({"resolution": {"status": status, "note": note, "by": by}})
    row = pg.fetch_one_dict(RESOLVE, {"status": status, "resolution": resolution, "id": effect_id,
                                 "project": str(project_id), "note": note, "by": by})
    return None if row is None else _record(row)
