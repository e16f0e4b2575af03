"""A function's runs, newest first, for the UI: each run's status, input, result and the
version its load step pinned (its tool calls are its steps, served by the jobs routes)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tasks.engine import pg

RUNS = """
SELECT j.id AS job_id, j.status, j.payload -> 'input' AS input, j.result, j.last_error,
       j.parent_job_id, j.created_at, j.started_at, j.completed_at,
       (SELECT (s.output ->> 'version')::int FROM job_steps s
        WHERE s.job_id = j.id AND s.seq = 1 AND s.name = 'load' AND s.status = 'completed')
       AS version,
       (SELECT count(*) FROM job_steps s WHERE s.job_id = j.id AND s.name LIKE 'call:%%')
       AS calls
FROM agent_jobs j
WHERE j.project_id = %(p)s AND j.job_type = 'function.run' AND j.payload ->> 'name' = %(n)s
ORDER BY j.created_at DESC, j.id DESC LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Run:
    job_id: uuid.UUID
    status: str
    input: Any
    result: Any
    last_error: str | None
    parent_job_id: uuid.UUID | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    version: int | None  # None until the run has loaded its version
    calls: int  # tool calls recorded so far


def of_function(project_id: uuid.UUID | str, name: str, limit: int) -> list[Run]:
    return [Run(**row) for row in pg.fetch_dicts(
        RUNS, {"p": str(project_id), "n": name, "limit": limit})]
