"""Traces over OTLP/HTTP from real processes (issue 27): a gunicorn web process and a celery
worker started with the standard OTEL_* variables send the request's span, the job's run and
its steps, one trace, to a local receiver speaking the protocol."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tests.e2e import procs as p
from tests.support.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.e2e


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.close()


def test_a_request_and_its_job_reach_an_otlp_receiver_as_one_trace(procs: p.Procs,
                                                                    receiver: OtlpReceiver):
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    _, base = procs.web(env={**otel, "OTEL_SERVICE_NAME": "sy-web"})
    procs.worker("w", env={**otel, "OTEL_SERVICE_NAME": "sy-worker"})
    with session_scope(session_factory()) as s:
        _, token = create_token(s, "otlp")
    auth = {"Authorization": f"Bearer {token}"}
    pid = httpx.post(f"{base}/api/projects", json={"name": "otlp"}, headers=auth).json()["id"]
    job = httpx.post(f"{base}/api/projects/{pid}/jobs", headers=auth, json={
        "job_type": "system.canary", "payload": {"steps": 2}}).json()["job_id"]
    procs.wait(lambda: p.status(job) == "completed", 30, "the canary completed")

    def arrived() -> bool:
        names = receiver.names()
        return "job system.canary" in names and "step step-2" in names
    procs.wait(arrived, 30, "the worker's spans at the receiver")

    [run] = [s for s in receiver.spans if s.name == "job system.canary"]
    assert run.service == "sy-worker" and run.attributes["switchyard.job.id"] == job
    procs.wait(lambda: any(s.service == "sy-web" and s.span_id == run.parent_span_id
                           for s in receiver.spans), 30, "the request's span")
    [request] = [s for s in receiver.spans if s.span_id == run.parent_span_id]
    assert request.trace_id == run.trace_id and "jobs" in request.name
    steps = [s for s in receiver.spans if s.name.startswith("step ")]
    assert {s.trace_id for s in steps} == {run.trace_id} and len(steps) == 2
