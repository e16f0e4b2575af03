"""GET /metrics: Prometheus text for the operator, from cheap queries read once per few seconds.

Every figure read from PostgreSQL is bounded by the live backlog or by an index range,
never by the history the tables keep: jobs not yet finished (the status/type index),
the oldest due job per queue (the ready index), step durations from the newest step
events (a primary-key range), table sizes from the planner's estimates. One reading
serves every scrape for SWITCHYARD_METRICS_CACHE_SECONDS; figures of this process
(open streams) are live.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.streams.hub import hub
from tasks.engine import pg
from tasks.engine.fair import unpublished
from tasks.engine.sql import due
from tasks.engine.status import ACTIVE, sql_list
from tasks.settings import get_settings

clock: Callable[[], float] = time.monotonic  # replaced by the tests
STEP_EVENTS_SAMPLED = 20_000  # the newest step events the duration quantiles look at

UNFINISHED_JOBS = (f"SELECT job_type, status, count(*) AS n FROM agent_jobs "
                   f"WHERE status IN {sql_list(ACTIVE)} GROUP BY 1, 2")
# Per queue, the oldest due job's age, and how many due jobs are not sent to a worker yet
# (held back by their owner's cap, tasks.engine.fair, or waiting for the dispatch sweep).
OLDEST_DUE = ("SELECT queue, extract(epoch FROM now() - min(run_after)) AS age, "
              f"count(*) FILTER (WHERE {unpublished('agent_jobs')}) AS held FROM agent_jobs "
              f"WHERE {due()} GROUP BY 1")
STEP_QUANTILES = """
SELECT j.job_type,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM s.finished_at - s.started_at))
        AS p50,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM s.finished_at - s.started_at))
        AS p99
FROM agent_job_events e
-- a step's outcome: its own event, or the one its job's move carries (`data.step`)
CROSS JOIN LATERAL (SELECT CASE e.type WHEN 'status' THEN e.data->'step' ELSE e.data END AS d) o
JOIN job_steps s ON s.job_id = e.job_id AND s.seq = (o.d->>'seq')::int
JOIN agent_jobs j ON j.id = e.job_id
WHERE e.id > %(floor)s AND e.type IN ('step', 'status') AND o.d->>'status' = 'completed'
  AND e.created_at > now() - interval '5 minutes' AND s.finished_at IS NOT NULL
GROUP BY 1
"""
TOTALS = """
SELECT (SELECT COALESCE(max(id), 0) FROM agent_job_events) AS events,
       (SELECT count(*) FROM worker_heartbeats WHERE stopped_at IS NULL
          AND last_seen_at > now() - make_interval(secs => %(stale)s)) AS alive,
       (SELECT json_object_agg(name, rows) FROM (
          SELECT name, (SELECT sum(GREATEST(c.reltuples, 0)) FROM pg_class c  -- or its partitions
                        WHERE c.relkind = 'r' AND (c.oid = name OR c.oid IN
                            (SELECT relid FROM pg_partition_tree(name)))) AS rows
          FROM unnest(ARRAY['agent_jobs', 'agent_job_events', 'job_steps']::regclass[]) name
       ) tables) AS table_rows
"""


@dataclass(frozen=True)
class Reading:
    """What one refresh read from PostgreSQL."""

    jobs: list[tuple[str, str, int]]
    oldest_due: list[tuple[str, float]]
    held_back: list[tuple[str, int]]
    step_quantiles: list[tuple[str, float, float]]
    events_written: int
    workers_alive: int
    table_rows: dict[str, float]


def read_database() -> Reading:
    settings = get_settings()
    totals = pg.fetch_one_dict(TOTALS, {"stale": settings.stale_after_seconds})
    assert totals is not None  # scalar subqueries: always one row
    events, alive, rows = totals["events"], totals["alive"], totals["table_rows"]
    # The floor as a value, not a subquery: the planner then sees a short id range and
    # joins by index, instead of planning for a third of the events table.
    floor = max(int(events) - STEP_EVENTS_SAMPLED, 0)
    due_rows = pg.fetch_dicts(OLDEST_DUE)
    return Reading(
        jobs=[(r["job_type"], r["status"], int(r["n"])) for r in pg.fetch_dicts(UNFINISHED_JOBS)],
        oldest_due=[(r["queue"], float(r["age"])) for r in due_rows],
        held_back=[(r["queue"], int(r["held"])) for r in due_rows],
        step_quantiles=[(r["job_type"], float(r["p50"]), float(r["p99"])) for r in
                        pg.fetch_dicts(STEP_QUANTILES, {"floor": floor})],
        events_written=int(events), workers_alive=int(alive), table_rows=dict(rows or {}))


class Cached:
    """One value for `ttl()` seconds; concurrent callers wait for the one refresh."""

    def __init__(self, load: Callable[[], Any], ttl: Callable[[], float]) -> None:
        self._load, self._ttl = load, ttl
        self._lock = threading.Lock()
        self._value: Any = None
        self._at = 0.0

    def get(self) -> Any:
        with self._lock:
            if self._value is None or clock() - self._at >= self._ttl():
                self._value, self._at = self._load(), clock()
            return self._value

    def forget(self) -> None:
        with self._lock:
            self._value = None


_reading = Cached(read_database, lambda: get_settings().metrics_cache_seconds)


class SwitchyardCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        r: Reading = _reading.get()
        jobs = GaugeMetricFamily("switchyard_jobs", "Jobs not yet finished, by type and status",
                                 labels=["job_type", "status"])
        for job_type, status, n in r.jobs:
            jobs.add_metric([job_type, status], n)
        yield jobs
        age = GaugeMetricFamily("switchyard_queue_oldest_age_seconds",
                                "Age of the oldest due queued job", labels=["queue"])
        for queue, seconds in r.oldest_due:
            age.add_metric([queue], seconds)
        yield age
        held = GaugeMetricFamily("switchyard_queue_held_back",
                                 "Due queued jobs not sent to a worker yet (their owner's cap, "
                                 "or the dispatch sweep's next tick)", labels=["queue"])
        for queue, n in r.held_back:
            held.add_metric([queue], n)
        yield held
        steps = GaugeMetricFamily("switchyard_step_duration_seconds",
                                  "Durations of steps completed in the last 5 minutes (among "
                                  f"the newest {STEP_EVENTS_SAMPLED} step events)",
                                  labels=["job_type", "quantile"])
        for job_type, p50, p99 in r.step_quantiles:
            steps.add_metric([job_type, "0.5"], p50)
            steps.add_metric([job_type, "0.99"], p99)
        yield steps
        events = CounterMetricFamily("switchyard_events_written", "Events written (all time)")
        events.add_metric([], float(r.events_written))
        yield events
        workers = GaugeMetricFamily("switchyard_workers_alive",
                                    "Workers whose heartbeat is fresh")
        workers.add_metric([], r.workers_alive)
        yield workers
        rows = GaugeMetricFamily("switchyard_table_rows_estimate",
                                 "Rows in the big tables (the planner's estimate)",
                                 labels=["table"])
        for table, n in sorted(r.table_rows.items()):
            rows.add_metric([table], float(n))
        yield rows
        subs = GaugeMetricFamily("switchyard_stream_subscribers",
                                 "Open SSE/WebSocket streams in this web process")
        subs.add_metric([], hub.subscribers)
        yield subs


_registry = CollectorRegistry()
_registry.register(SwitchyardCollector())


def render() -> bytes:
    return generate_latest(_registry)


def forget() -> None:
    """Drop the cached reading (tests; a settings change)."""
    _reading.forget()
