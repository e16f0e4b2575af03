"""What a /metrics scrape costs on a big table: the old full-table queries vs the cached reading.

    python bench/metrics_scrape.py [--jobs 200000] [--backlog 2000] [--scrapes 1000]

A scratch database (DATABASE_URL's server, or embedded) gets `--jobs` jobs (`--backlog`
queued and as many running, 1% failed, the rest completed; 3 steps and 3 step events
each but the queued), vacuumed and analysed. Prints the median time of the queries
the collector used to run per scrape, of one refresh of the new reading, and the
mean time of a scrape through the Flask app (`--scrapes` in a row: one refresh per
SWITCHYARD_METRICS_CACHE_SECONDS).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOKEN = "bench-metrics-token-" + "0123456789" * 2  # 32+ characters, as required
# The collector's statements before it was cached (bench/RESULTS.md: "before").
OLD_QUERIES = [
    "SELECT job_type, status, count(*) FROM agent_jobs GROUP BY 1, 2",
    "SELECT queue, extract(epoch FROM now() - min(run_after)) FROM agent_jobs "
    "WHERE status = 'queued' AND run_after <= now() GROUP BY 1",
    "SELECT j.job_type, percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM "
    "s.finished_at - s.started_at)), percentile_cont(0.99) WITHIN GROUP (ORDER BY "
    "extract(epoch FROM s.finished_at - s.started_at)) FROM job_steps s JOIN agent_jobs j "
    "ON j.id = s.job_id WHERE s.finished_at > now() - interval '5 minutes' GROUP BY 1",
    "SELECT COALESCE(max(id), 0) FROM agent_job_events",
]
FILL = """
INSERT INTO owners (id, name) VALUES ('00000000-0000-0000-0000-00000000000b', 'bench');
INSERT INTO projects (id, owner_id, name)
SELECT ('00000000-0000-0000-0000-0000000000' || lpad(p::text, 2, '0'))::uuid,
       '00000000-0000-0000-0000-00000000000b', 'p' || p FROM generate_series(10, 29) p;
INSERT INTO agent_jobs (id, project_id, job_type, queue, status, payload, idempotency_key,
                        run_after, created_at, started_at, completed_at, attempts, locked_by)
SELECT gen_random_uuid(),
       ('00000000-0000-0000-0000-0000000000' || (10 + mod(i, 20)))::uuid,
       'bench.type' || mod(i, 8), 'default',
       CASE WHEN i <= %(backlog)s THEN 'queued' WHEN i <= 2 * %(backlog)s THEN 'running'
            WHEN mod(i, 100) = 2 THEN 'failed' ELSE 'completed' END,
       '{}', 'k' || i, t, t, t, CASE WHEN i > 2 * %(backlog)s THEN t + interval '3 seconds' END,
       1, CASE WHEN i > %(backlog)s AND i <= 2 * %(backlog)s THEN 'bench-worker' END
FROM generate_series(1, %(jobs)s) i, LATERAL (SELECT now() - (i || ' seconds')::interval) x(t);
INSERT INTO job_steps (job_id, seq, name, status, output, started_at, finished_at)
SELECT id, s, 'step-' || s, 'completed', '{}', started_at + (s || ' seconds')::interval,
       started_at + (s || ' seconds')::interval + interval '0.5 seconds'
FROM agent_jobs, generate_series(1, 3) s WHERE status <> 'queued';
INSERT INTO agent_job_events (job_id, project_id, type, message, data, created_at)
SELECT job_id, j.project_id, 'step', name || ' completed',
       jsonb_build_object('name', name, 'seq', seq, 'status', 'completed'), finished_at
FROM job_steps JOIN agent_jobs j ON j.id = job_id ORDER BY finished_at;
"""


def median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--backlog", type=int, default=2000, help="queued, and as many running")
    parser.add_argument("--scrapes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        import psycopg

        from app.ops.embedded import embedded_postgres, scratch_database

        tmp = Path(tempfile.mkdtemp(prefix="switchyard-bench-"))
        admin = os.environ.get("DATABASE_URL") or stack.enter_context(embedded_postgres(tmp))
        url = stack.enter_context(scratch_database(admin, "switchyard_bench"))
        os.environ.update({"DATABASE_URL": url, "SWITCHYARD_METRICS_TOKEN": TOKEN,
                           "SWITCHYARD_DATA_DIR": str(tmp / "data")})
        from tasks.engine import pg
        from tasks.settings import get_settings

        get_settings.cache_clear()
        t0 = time.perf_counter()
        with psycopg.connect(get_settings().libpq_url, autocommit=True) as conn:
            for statement in FILL.split(";\n"):
                if statement.strip():
                    conn.execute(statement, {"jobs": args.jobs, "backlog": args.backlog}
                                 if "%(" in statement else None)
            conn.execute("VACUUM ANALYZE")
        n = pg.fetch_one_dict("SELECT (SELECT count(*) FROM agent_jobs) AS jobs, (SELECT count(*) "
                              "FROM job_steps) AS steps, (SELECT count(*) FROM agent_job_events) "
                              "AS events")
        assert n is not None
        print(f"filled {n['jobs']} jobs, {n['steps']} steps, {n['events']} events "
              f"in {time.perf_counter() - t0:.0f} s")

        old = median_ms(lambda: [pg.fetch_dicts(q) for q in OLD_QUERIES], args.runs)
        from app.ops import metrics

        refresh = median_ms(metrics.read_database, args.runs)
        from app.web import create_app

        client = create_app().test_client()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        refreshes = [0]
        read = metrics.read_database

        def counted() -> metrics.Reading:
            refreshes[0] += 1
            return read()

        metrics._reading._load = counted
        metrics.forget()
        t0 = time.perf_counter()
        for _ in range(args.scrapes):
            assert client.get("/metrics", headers=headers).status_code == 200
        elapsed = time.perf_counter() - t0
        print(f"before: the old collector's queries, median {old:.1f} ms per scrape")
        print(f"after: one refresh of the reading, median {refresh:.1f} ms "
              f"(once per {get_settings().metrics_cache_seconds:g} s)")
        print(f"after: {args.scrapes} scrapes through the app in {elapsed:.2f} s, "
              f"mean {elapsed / args.scrapes * 1000:.2f} ms, {refreshes[0]} refresh(es)")


if __name__ == "__main__":
    main()
