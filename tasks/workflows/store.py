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
    return Saved(row[0], row[1], row[2])


COLUMNS = "id, project_id, name, version, spec, created_at"


def get(workflow_id: uuid.UUID | str) -> Stored | None:
    row = pg.fetch_one(f"SELECT {COLUMNS} FROM workflows WHERE id = %s", (str(workflow_id),))
    return Stored(*row) if row else None


def version_of(project_id: uuid.UUID | str, name: str, version: int) -> Stored | None:
    row = pg.fetch_one(f"SELECT {COLUMNS} FROM workflows WHERE project_id = %s AND name = %s "
                       "AND version = %s", (str(project_id), name, version))
    return Stored(*row) if row else None


def listing(project_id: uuid.UUID | str) -> list[dict[str, Any]]:
    """Each name with its versions (newest first) and the newest version's id."""
    rows = pg.fetch("SELECT name, array_agg(version ORDER BY version DESC), "
                    "(array_agg(id ORDER BY version DESC))[1], max(created_at) "
                    "FROM workflows WHERE project_id = %s GROUP BY name ORDER BY name",
                    (str(project_id),))
    return [{"name": name, "versions": list(versions), "latest_id": str(latest),
             "updated_at": updated} for name, versions, latest, updated in rows]
