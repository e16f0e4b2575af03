"""Workflow definitions in PostgreSQL: each save of a name is a new, immutable version."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tasks.engine import pg
from tasks.services import next_version
from tasks.workflows.spec import WorkflowSpec

# The next version of a name, unless the newest already holds exactly this spec (a
# retried save answers with it rather than minting a twin).
SAVE = """
WITH newest AS (
    SELECT id, version, spec FROM workflows
    WHERE project_id = %(project)s AND name = %(name)s ORDER BY version DESC LIMIT 1),
ins AS (
    INSERT INTO workflows (id, project_id, name, version, spec)
    SELECT %(id)s, %(project)s, %(name)s, coalesce((SELECT version FROM newest), 0) + 1,
           %(spec)s::jsonb
    WHERE NOT EXISTS (SELECT 1 FROM newest WHERE spec = %(spec)s::jsonb)
    RETURNING id, version, true AS created)
SELECT id, version, created FROM ins
UNION ALL SELECT id, version, false FROM newest WHERE spec = %(spec)s::jsonb
"""




@dataclass(frozen=True)
class Saved:
    id: uuid.UUID
    version: int
    created: bool


@dataclass(frozen=True)
class Stored:
    id: uuid.UUID
    project_id: uuid.UUID
    name: str
    version: int
    spec: dict[str, Any]
    created_at: datetime


def save(project_id: uuid.UUID | str, spec: WorkflowSpec) -> Saved:
    params = {"id": uuid.uuid4(), "project": str(project_id), "name": spec.name,
              "spec": json.dumps(spec.model_dump(mode="json"))}
    row = next_version.insert_next(SAVE, params)  # saves of one name at once: see there
    return Saved(row["id"], row["version"], row["created"])


COLUMNS = "id, project_id, name, version, spec, created_at"


def get(workflow_id: uuid.UUID | str) -> Stored | None:
    row = pg.fetch_one_dict(f"SELECT {COLUMNS} FROM workflows WHERE id = %s",
                            (str(workflow_id),))
    return Stored(**row) if row else None


def version_of(project_id: uuid.UUID | str, name: str, version: int) -> Stored | None:
    row = pg.fetch_one_dict(f"SELECT {COLUMNS} FROM workflows WHERE project_id = %s "
                            "AND name = %s AND version = %s", (str(project_id), name, version))
    return Stored(**row) if row else None


def listing(project_id: uuid.UUID | str) -> list[dict[str, Any]]:
    """Each name with its versions (newest first) and the newest version's id."""
    rows = pg.fetch_dicts("SELECT name, array_agg(version ORDER BY version DESC) AS versions, "
                          "(array_agg(id ORDER BY version DESC))[1] AS latest_id, "
                          "max(created_at) AS updated_at "
                          "FROM workflows WHERE project_id = %s GROUP BY name ORDER BY name",
                          (str(project_id),))
    return [{"name": r["name"], "versions": list(r["versions"]), "latest_id": str(r["latest_id"]),
             "updated_at": r["updated_at"]} for r in rows]


# --- runs, as the API reads them ----------------------------------------------------------

def run(job_id: uuid.UUID | str) -> dict[str, Any] | None:
    """A `workflow.run` job's row (None for any other job)."""
    return pg.fetch_one_dict("SELECT id, project_id, status, payload, last_error, created_at, "
                             "completed_at FROM agent_jobs WHERE id = %s "
                             "AND job_type = 'workflow.run'", (str(job_id),))


# A run's steps as the driver last mirrored them, with each child job's live status (the
# driver only looks again when one ends).
RUN_STEPS = """
SELECT s.name, s.status, s.job_id, s.output, s.error, s.approval_id, c.status AS job_status,
       c.result AS job_result
FROM workflow_run_steps s LEFT JOIN agent_jobs c ON c.id = s.job_id
WHERE s.run_job_id = %s
"""


def run_steps(job_id: uuid.UUID | str) -> list[dict[str, Any]]:
    return pg.fetch_dicts(RUN_STEPS, (str(job_id),))


def runs(project_id: uuid.UUID | str, workflow_id: uuid.UUID | str) -> list[dict[str, Any]]:
    """A workflow's latest 50 runs, newest first."""
    return pg.fetch_dicts("SELECT id, status, created_at, payload->'inputs' AS inputs "
                          "FROM agent_jobs WHERE project_id = %s AND job_type = 'workflow.run' "
                          "AND payload->>'workflow_id' = %s ORDER BY created_at DESC LIMIT 50",
                          (str(project_id), str(workflow_id)))
