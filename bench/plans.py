"""Plans that stay right: the hot path's statements as the backlog grows, on statistics that
never saw it.

    python bench/plans.py [--sizes 300,3000,30000] [--samples 200]

A worker's connection keeps each statement's generic plan (psycopg prepares it; PostgreSQL
plans it without its parameters, on the statistics of that moment). Here the statistics
are taken when the tables hold only ended jobs, the connection is made to plan generically
at once (`plan_cache_mode = force_generic_plan`, what it settles on after five runs), and
then, for each size N:

- resume: N parents waiting on their children, and each child's finish asking its parent to
  resume (tasks.engine.control.resume_if_ready: the statement, its event and the publish);
- finish: N due jobs of other owners queued, and an owner with room finishing its runs
  (tasks.engine.store.finish: the move, the outcome, its event, and the look for the
  owner's next held-back job: it has none here, so the look is all the pick costs);
- scheduled: the same finish, the owner holding N jobs of its own scheduled for tomorrow
  (queued, held back, not due): its look must not walk them.

Milliseconds per call, p50 and mean. A plan that reads by key is flat in N; one that walks
an index of every owner's rows grows with it. Services come from DATABASE_URL /
BROKER_URL, or are started embedded; print the load beside the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.costs import load_and_steal  # noqa: E402
from bench.throughput import setup_services  # noqa: E402

JOBS = """
INSERT INTO agent_jobs (id, project_id, job_type, idempotency_key, dispatched_at, status)
SELECT gen_random_uuid(), %(project)s, 'system.canary', %(key)s || g, now(), %(status)s
FROM generate_series(1, %(n)s) g
"""


def new_project(pg) -> str:
    owner, project = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, owner))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'plans')",
               (project, owner))
    return project


def jobs(pg, project: str, key: str, status: str, n: int) -> None:
    pg.execute(JOBS, {"project": project, "key": key, "status": status, "n": n})


def fresh(pg) -> None:
    """Tables holding only ended jobs, measured; the connection planning generically."""
    pg.execute("TRUNCATE agent_jobs, job_steps, agent_job_events, projects, owners CASCADE")
    jobs(pg, new_project(pg), "ended", "completed", 200)
    pg.execute("ANALYZE agent_jobs")
    # An automatic ANALYZE during a run would make the plans again on the grown table
    # (a scratch database: nothing else needs it).
    pg.execute("ALTER TABLE agent_jobs SET (autovacuum_enabled = off)")
    pg.reset()
    pg.connection().execute("SET plan_cache_mode = force_generic_plan")


def resume(pg, n: int, samples: int) -> list[float]:
    from tasks.engine import control

    project = new_project(pg)
    jobs(pg, project, "w", "waiting", n)
    pg.execute("UPDATE agent_jobs p SET wait_reason = 'children', wait_for = ARRAY("
               "SELECT c.id FROM agent_jobs c WHERE c.status = 'completed' LIMIT 2) "
               "WHERE p.status = 'waiting'")
    parents = [r["id"] for r in pg.fetch_dicts(
        "SELECT id FROM agent_jobs WHERE status = 'waiting' LIMIT %s", (samples,))]
    return [timed(lambda p=p: control.resume_if_ready(p) == [p]) for p in parents]


SCHEDULED = """
INSERT INTO agent_jobs (id, project_id, job_type, idempotency_key, run_after, status)
SELECT gen_random_uuid(), %(project)s, 'system.canary', 's' || g, now() + interval '1 day',
    'queued'
FROM generate_series(1, %(n)s) g
"""


def finish(pg, n: int, samples: int, *, scheduled: bool = False) -> list[float]:
    from tasks.engine import store
    from tasks.engine.status import JobStatus

    mine, times = new_project(pg), []
    if scheduled:
        pg.execute(SCHEDULED, {"project": mine, "n": n})
    else:
        jobs(pg, new_project(pg), "q", "queued", n)
    for r in range(max(1, samples // 8)):  # 8 of its 16 places taken: each finish has room
        jobs(pg, mine, f"m{r}-", "queued", 8)
        for row in pg.fetch_dicts("SELECT id FROM agent_jobs WHERE project_id = %s "
                                  "AND status = 'queued' AND dispatched_at IS NOT NULL", (mine,)):
            c = store.claim(row["id"], "bench-plans")
            assert c is not None
            times.append(timed(lambda c=c: store.finish(
                store.Owner(c.id, c.token), 1, JobStatus.COMPLETED, None) is not None))
    return times


def timed(call: Callable[[], bool]) -> float:
    t = time.perf_counter()
    assert call()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,3000,30000")
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        setup_services(stack)
        import tasks.catalog  # noqa: F401 - registers every job type
        from tasks.engine import pg

        print(f"before: {load_and_steal()}")
        print(f"{'statement':>9} {'backlog':>8} {'ms p50':>8} {'ms mean':>8}")
        for name, run in (("resume", resume), ("finish", finish),
                          ("scheduled", functools.partial(finish, scheduled=True))):
            for n in (int(s) for s in args.sizes.split(",")):
                fresh(pg)
                times = run(pg, n, args.samples)
                print(f"{name:>9} {n:>8,} {statistics.median(times) * 1e3:>8.3f} "
                      f"{statistics.fmean(times) * 1e3:>8.3f}", flush=True)
        pg.reset()
        print(f"after: {load_and_steal()}")


if __name__ == "__main__":
    main()
