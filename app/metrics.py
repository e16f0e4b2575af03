"""GET /metrics: Prometheus text, read from PostgreSQL at scrape time plus this process's hub."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.hub import hub
from tasks import pg


class SwitchyardCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("switchyard_jobs", "Jobs by type and status",
                                 labels=["job_type", "status"])
        for job_type, status, n in pg.fetch(
                "SELECT job_type, status, count(*) FROM agent_jobs GROUP BY 1, 2"):
            jobs.add_metric([job_type, status], n)
        yield jobs
        age = GaugeMetricFamily("switchyard_queue_oldest_age_seconds",
                                "Age of the oldest due queued job", labels=["queue"])
        for queue, seconds in pg.fetch(
                "SELECT queue, extract(epoch FROM now() - min(run_after)) FROM agent_jobs "
                "WHERE status = 'queued' AND run_after <= now() GROUP BY 1"):
            age.add_metric([queue], float(seconds))
        yield age
        steps = GaugeMetricFamily("switchyard_step_duration_seconds",
                                  "Step durations over the last 5 minutes",
                                  labels=["job_type", "quantile"])
        for job_type, p50, p99 in pg.fetch(
                "SELECT j.job_type, "
                "percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM "
                "s.finished_at - s.started_at)), "
                "percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM "
                "s.finished_at - s.started_at)) "
                "FROM job_steps s JOIN agent_jobs j ON j.id = s.job_id "
                "WHERE s.finished_at > now() - interval '5 minutes' GROUP BY 1"):
            steps.add_metric([job_type, "0.5"], float(p50))
            steps.add_metric([job_type, "0.99"], float(p99))
        yield steps
        events = CounterMetricFamily("switchyard_events_written", "Events written (all time)")
        row = pg.fetch_one("SELECT COALESCE(max(id), 0) FROM agent_job_events")
        events.add_metric([], float(row[0] if row else 0))
        yield events
        subs = GaugeMetricFamily("switchyard_stream_subscribers",
                                 "Open SSE/WebSocket streams in this web process")
        subs.add_metric([], hub.subscribers)
        yield subs


_registry = CollectorRegistry()
_registry.register(SwitchyardCollector())


def render() -> bytes:
    return generate_latest(_registry)
