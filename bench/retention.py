"""Retention at 10 M events: what a pass costs, and that the hot path does not notice.

    python bench/retention.py [--events 10000000] [--days 40]

Makes a scratch database on DATABASE_URL's server (embedded PostgreSQL if unset),
fills the event log with `--events` events spread evenly over `--days` days (and one
finished job per 100 events), then measures, in one run:

- the hot path before and during the pass: single-row event inserts (p50/p99) and
  the hub's poll (`id > cursor ORDER BY id LIMIT 500`) across every day's partition;
- one retention pass (30 days kept): how many days and rows it removed, how long it
  took and how long it held any lock an insert would wait on;
- for comparison, the same day removed the row-by-row way (DELETE … WHERE created_at).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def fill(conn, events: int, days: int):
    per_day = events // days
    owner = conn.execute("INSERT INTO owners (id, name) VALUES (gen_random_uuid(), 'bench') "
                         "RETURNING id").fetchone()[0]
    project = conn.execute("INSERT INTO projects (id, owner_id, name) VALUES "
                           "(gen_random_uuid(), %s, 'bench') RETURNING id", (owner,)).fetchone()[0]
    conn.execute("SELECT switchyard_event_partitions((now() - make_interval(days => %s))::date, "
                 "now()::date)", (days,))
    started = time.monotonic()
    for day in range(days, 0, -1):
        conn.execute(
            "INSERT INTO agent_jobs (id, project_id, job_type, status, idempotency_key, "
            "created_at, completed_at) SELECT gen_random_uuid(), %(p)s, 'system.canary', "
            "'completed', 'bench-' || %(d)s || '-' || g, "
            "now() - make_interval(days => %(d)s), now() - make_interval(days => %(d)s) "
            "FROM generate_series(1, %(n)s) g", {"p": project, "d": day, "n": per_day // 100})
        conn.execute(
            "INSERT INTO agent_job_events (job_id, project_id, type, message, data, created_at) "
            "SELECT NULL, %(p)s, 'step', 'step-1 completed', '{\"name\": \"step-1\"}'::jsonb, "
            "now() - make_interval(days => %(d)s) + make_interval(secs => g * 86000.0 / %(n)s) "
            "FROM generate_series(1, %(n)s) g", {"p": project, "d": day, "n": per_day})
        print(f"  day -{day}: {per_day:,} events ({time.monotonic() - started:.0f} s)",
              flush=True)
    conn.execute("VACUUM ANALYZE agent_job_events")
    conn.execute("VACUUM ANALYZE agent_jobs")
    return project


def hot_path(conn, project, n: int = 500) -> dict[str, float]:
    inserts, polls = [], []
    cursor = conn.execute("SELECT max(id) - 400 FROM agent_job_events").fetchone()[0]
    for _ in range(n):
        t = time.perf_counter()
        conn.execute("INSERT INTO agent_job_events (project_id, type) VALUES (%s, 'log')",
                     (project,))
        inserts.append(time.perf_counter() - t)
        t = time.perf_counter()
        conn.execute("SELECT id, type, data FROM agent_job_events WHERE id > %s "
                     "ORDER BY id LIMIT 500", (cursor,)).fetchall()
        polls.append(time.perf_counter() - t)
    ms = 1000
    return {"insert_p50": statistics.median(inserts) * ms, "insert_p99": pct(inserts, 99) * ms,
            "poll_p50": statistics.median(polls) * ms, "poll_p99": pct(polls, 99) * ms}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=40)
    args = parser.parse_args()

    import psycopg

    from app.ops.embedded import embedded_postgres, scratch_database
    from tasks.engine import pg, retention
    from tasks.settings import get_settings

    with contextlib.ExitStack() as stack:
        server = os.environ.get("DATABASE_URL") or stack.enter_context(
            embedded_postgres(Path(stack.enter_context(_tmp())) / "data"))
        url = stack.enter_context(scratch_database(server, "bench_retention"))
        os.environ["DATABASE_URL"] = url
        get_settings.cache_clear()
        conn = psycopg.connect(url, autocommit=True)
        print(f"filling {args.events:,} events over {args.days} days …", flush=True)
        t0 = time.monotonic()
        project = fill(conn, args.events, args.days)
        print(f"filled in {time.monotonic() - t0:.0f} s; "
              f"{conn.execute('SELECT count(*) FROM agent_job_events').fetchone()[0]:,} events, "
              f"{conn.execute('SELECT pg_size_pretty(pg_total_relation_size(%s))', ('agent_jobs',)).fetchone()[0]} jobs table")  # noqa: E501

        before = hot_path(conn, project)
        during: dict[str, float] = {}
        runner = threading.Thread(target=lambda: during.update(hot_path(
            psycopg.connect(url, autocommit=True), project, 2000)))
        t0 = time.monotonic()
        runner.start()
        report = retention.maintain(30)
        pass_seconds = time.monotonic() - t0
        runner.join()
        pg.reset()
        after = hot_path(conn, project)

        # The other way, for comparison: one more day removed row by row.
        t0 = time.monotonic()
        deleted = conn.execute(
            "DELETE FROM agent_job_events WHERE created_at < "
            "(now() AT TIME ZONE 'UTC')::date - 28").rowcount
        delete_seconds = time.monotonic() - t0

        print()
        print(f"retention pass: {len(report.partitions_dropped)} days dropped, "
              f"{report.jobs_deleted:,} jobs deleted, in {pass_seconds:.1f} s")
        for label, figures in (("before", before), ("during", during), ("after", after)):
            print(f"hot path {label:>6}: insert p50 {figures['insert_p50']:.2f} ms "
                  f"p99 {figures['insert_p99']:.2f} ms; hub poll p50 "
                  f"{figures['poll_p50']:.2f} ms p99 {figures['poll_p99']:.2f} ms")
        print(f"row-by-row DELETE of one more day: {deleted:,} rows in {delete_seconds:.1f} s")
        conn.close()


@contextlib.contextmanager
def _tmp():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        yield d


if __name__ == "__main__":
    main()
