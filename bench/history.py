"""Jobs of history: finished jobs of another project, with their steps, as a database that has
run for a while holds them (bench/linear.py, bench/throughput.py --history). Every hot-path
statement must reach its rows by key or through an index of unfinished rows, so a benchmark
run on a grown table must show the figures of an empty one."""

from __future__ import annotations

import uuid
from types import ModuleType

HISTORY_JOB = """
INSERT INTO agent_jobs (id, project_id, job_type, idempotency_key, status, attempts,
    started_at, completed_at, result, dispatched_at)
SELECT gen_random_uuid(), %(project)s, 'system.canary', 'h' || (%(from)s + g), 'completed', 1,
    now() - interval '1 day', now() - interval '1 day', '{"steps": 3}', now() - interval '1 day'
FROM generate_series(1, %(n)s) g
"""
HISTORY_STEPS = """
INSERT INTO job_steps (job_id, seq, name, status, output, started_at, finished_at)
SELECT j.id, s, 'step-' || s, 'completed', jsonb_build_object('n', s), j.started_at,
    j.completed_at
FROM agent_jobs j CROSS JOIN generate_series(1, 3) s
WHERE j.project_id = %(project)s AND j.idempotency_key > 'h' AND j.started_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM job_steps x WHERE x.job_id = j.id)
"""
CHUNK = 100_000


class History:
    """One project holding the history, grown by `grow`: of `owner` (an owner's count of
    its places must not read its finished jobs either), or of an owner of its own."""

    def __init__(self, pg: ModuleType, owner: str | None = None) -> None:
        self.pg, self.have = pg, 0
        self.project = str(uuid.uuid4())
        pg.execute("SET statement_timeout = 0")  # a million jobs of history take a while
        if owner is None:
            owner = str(uuid.uuid4())
            pg.execute("INSERT INTO owners (id, name) VALUES (%s, 'history')", (owner,))
        pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'history')",
                   (self.project, owner))

    def grow(self, size: int) -> None:
        """Up to `size` finished 3-step jobs, then measured (VACUUM ANALYZE) as autovacuum
        would have by then."""
        while self.have < size:
            n = min(CHUNK, size - self.have)
            self.pg.execute(HISTORY_JOB, {"project": self.project, "from": self.have, "n": n})
            self.have += n
        self.pg.execute(HISTORY_STEPS, {"project": self.project})
        self.pg.execute("VACUUM ANALYZE agent_jobs")
        self.pg.execute("VACUUM ANALYZE job_steps")
