"""OpenTelemetry traces (issue 27), read with the SDK's in-memory exporter: the request that
enqueued a job, the job's run, its steps, its child's run, model calls with the GenAI
conventions and effects, all in one trace carried by the jobs' rows; off and free without
the standard variables."""

# ruff: noqa: F811 - the fakes' fixtures are imported, then requested by name

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import telemetry
from tasks.services.llm.flow import call_llm
from tasks.services.llm.scripted import ScriptedProvider
from tasks.services.llm.types import LLMRequest
from tests.integration.jobdb import tuples, wait_for, wait_until
from tests.integration.test_effects import Fakes, deploy, fakes  # noqa: F401
from tests.support.fake_providers import fake_providers, fake_smtp  # noqa: F401


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert telemetry.setup("switchyard-test", exporter=exporter)
    try:
        yield exporter
    finally:
        telemetry.stop()


def by_name(exporter: InMemorySpanExporter, prefix: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_without_the_variables_tracing_is_off_and_nothing_is_stored(monkeypatch, project,
                                                                      worker):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert not telemetry.wanted() and not telemetry.setup("switchyard-test")
    assert telemetry.traceparent() is None
    with telemetry.span("nothing") as current:
        assert current is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not telemetry.wanted()


def test_a_request_its_job_the_steps_and_the_child_are_one_trace(db, worker, spans):
    # Given a web app with tracing on and a caller
    with session_scope(session_factory()) as s:
        _, token = create_token(s, "tracer")
    client, auth = create_app().test_client(), {"Authorization": f"Bearer {token}"}
    pid = client.post("/api/projects", headers=auth, json={"name": "Traced"}).json["id"]

    # When it enqueues a canary that spawns a child and waits for it
    r = client.post(f"/api/projects/{pid}/jobs", headers=auth, json={
        "job_type": "system.canary", "payload": {"steps": 2, "children": 1}})
    parent = r.json["job_id"]
    assert wait_for(parent, timeout=30)["status"] == "completed"
    [(child,)] = tuples("SELECT id::text FROM agent_jobs WHERE parent_job_id = %s", (parent,))
    wait_until(lambda: len(by_name(spans, "job ")) >= 3, what="the runs' spans")  # 2 + child

    # Then the request, each run of the parent (before and after its wait), its steps and
    # the child's run share one trace id, each run a child of the request's span
    [request] = [s for s in spans.get_finished_spans()
                 if s.kind.name == "SERVER" and s.name.startswith("POST") and "jobs" in s.name]
    trace_id = request.context.trace_id
    jobs = by_name(spans, "job system.canary")
    runs = {s.attributes["switchyard.job.id"]: [] for s in jobs}
    for s in jobs:
        runs[s.attributes["switchyard.job.id"]].append(s)
    assert set(runs) == {parent, child}
    assert {s.context.trace_id for s in spans.get_finished_spans()
            if s.name.startswith(("job ", "step "))} == {trace_id}
    assert all(s.parent.span_id == request.context.span_id for s in runs[parent])
    # The child's run hangs under the parent's run that spawned it
    parent_spans = {s.context.span_id for s in spans.get_finished_spans()}
    assert all(s.parent.span_id in parent_spans for s in runs[child])
    steps = by_name(spans, "step ")
    assert {s.attributes["switchyard.step.name"] for s in steps} >= {"step-1", "step-2"}
    assert tuples("SELECT count(*) FROM agent_jobs WHERE traceparent LIKE %s",
                  (f"00-{trace_id:032x}-%",)) == [(2,)]


def test_statements_on_a_connection_made_with_tracing_on_are_spans(db, spans):
    # psycopg's instrumentation wraps the connections made after it (a worker process sets
    # tracing up before its first): a statement is a span inside the current one
    from tasks.engine import pg

    with telemetry.span("outer"), pg.connect() as conn:
        conn.execute("SELECT 1")
    [outer] = by_name(spans, "outer")
    statements = [s for s in spans.get_finished_spans()
                  if s.attributes.get("db.system") == "postgresql"]
    assert statements and all(s.parent.span_id == outer.context.span_id for s in statements)


def test_a_statement_outside_any_work_is_no_trace_of_its_own(db, spans):
    # The heartbeat's and the sweeps' statements, every few seconds: noise at the collector
    from tasks.engine import pg

    with pg.connect() as conn:
        conn.execute("SELECT 'alone'")
    with telemetry.span("work"), pg.connect() as conn:
        conn.execute("SELECT 'inside'")
    said = [str(s.attributes.get("db.statement")) for s in spans.get_finished_spans()
            if s.attributes.get("db.system") == "postgresql"]
    assert any("inside" in t for t in said) and not any("alone" in t for t in said), said


def test_a_model_call_follows_the_genai_conventions(project, spans):
    req = LLMRequest(purpose="chat", system="", context={"user_message": "hi"},
                     messages=[{"role": "user", "content": "hi"}])
    with telemetry.span("outer"):
        result = call_llm(ScriptedProvider(), req, project_id=project, job_id=None)
    [chat] = by_name(spans, "chat ")
    assert chat.name == "chat scripted-1"
    a = chat.attributes
    assert (a["gen_ai.operation.name"], a["gen_ai.system"], a["gen_ai.request.model"],
            a["gen_ai.response.model"]) == ("chat", "scripted", "scripted-1", "scripted-1")
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (
        result.usage.input_tokens, result.usage.output_tokens)
    [outer] = by_name(spans, "outer")
    assert chat.parent.span_id == outer.context.span_id


def test_an_effect_is_a_span_without_its_arguments(project, spans, fakes: Fakes):
    deploy(fakes.http, project, "approval:traced", secret_note="do-not-trace")
    deploy(fakes.http, project, "approval:traced", secret_note="do-not-trace")
    first, again = by_name(spans, "effect deploy_hook")
    assert (first.attributes["switchyard.effect.status"],
            first.attributes["switchyard.effect.replayed"]) == ("succeeded", False)
    assert again.attributes["switchyard.effect.replayed"] is True
    every = str([dict(s.attributes) for s in spans.get_finished_spans()])
    assert "do-not-trace" not in every
    # The hook's call is an httpx span inside, which names only the host: a deploy hook's
    # path (here /deploy/site) is its secret
    calls = [s for s in spans.get_finished_spans() if s.kind.name == "CLIENT"
             and ("http.url" in s.attributes or "url.full" in s.attributes)]
    assert calls and "/deploy/site" not in every


CALLER_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736


@pytest.mark.parametrize("trusted", [False, True], ids=["tenants", "trusted callers"])
def test_a_callers_trace_context_is_continued_only_where_the_operator_trusts_callers(
        db, spans, monkeypatch, trusted):
    from tasks.settings import get_settings

    monkeypatch.setenv("SWITCHYARD_OTEL_TRUST_INCOMING", str(trusted).lower())
    get_settings.cache_clear()
    try:
        with session_scope(session_factory()) as s:
            _, token = create_token(s, "caller")
        client = create_app().test_client()
        auth = {"Authorization": f"Bearer {token}",
                "traceparent": f"00-{CALLER_TRACE:032x}-00f067aa0ba902b7-01"}
        pid = client.post("/api/projects", headers=auth, json={"name": "Named trace"}).json["id"]
        # When a caller enqueues a job naming a trace of its own
        r = client.post(f"/api/projects/{pid}/jobs", headers=auth, json={
            "job_type": "system.canary", "payload": {"steps": 1}, "run_after": FUTURE})
        stored = tuples("SELECT traceparent FROM agent_jobs WHERE id = %s", (r.json["job_id"],))
    finally:
        monkeypatch.delenv("SWITCHYARD_OTEL_TRUST_INCOMING")
        get_settings.cache_clear()
    [request] = [s for s in spans.get_finished_spans()
                 if s.kind.name == "SERVER" and "jobs" in s.name]
    # Then by default (tenants) the request starts a trace of its own, and so does its job;
    # an operator who trusts its callers (SWITCHYARD_OTEL_TRUST_INCOMING) continues theirs
    assert (request.context.trace_id == CALLER_TRACE) is trusted
    [(parent,)] = stored
    assert parent.startswith(f"00-{request.context.trace_id:032x}-{request.context.span_id:016x}-")


FUTURE = "2099-01-01T00:00:00+00:00"  # parked: never dispatched
