"""OpenTelemetry traces: off and free unless the standard variables ask for them.

With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set and
`OTEL_SDK_DISABLED` not true, each process exports over OTLP/HTTP (`OTEL_EXPORTER_OTLP_PROTOCOL`
http/protobuf; `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, the exporter's headers and
timeouts as the SDK reads them). The trace: the request that enqueued a job (Flask's
instrumentation) -> the job (`job <type>`, one span per run) -> each step run (`step <name>`)
-> model calls (`chat <model>`, GenAI conventions) and effects (`effect <kind>`), with the
database statements (psycopg) and outbound HTTP (httpx) inside.

The trace context travels in the job's row (`traceparent`, migration 0021), not only in the
Celery message: a wake-up is disposable (the dispatch sweep re-sends one without headers, a
retry is a new message), the row is not. A job enqueued inside another's run (a child, a
workflow's step, a night-shift fan-out) carries that run's context, so a workflow run is one
trace. Without the variables nothing here imports the SDK, and `span` is a no-op.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from tasks.settings import get_settings

log = logging.getLogger(__name__)

_state: dict[str, Any] = {"tracer": None, "provider": None}


def wanted() -> bool:
    """Do the standard variables ask for traces?"""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def enabled() -> bool:
    return _state["tracer"] is not None


def setup(default_service: str, exporter: Any = None) -> bool:
    """Start tracing in this process when the variables ask for it (or with `exporter`, a
    test's in-memory one); idempotent. Returns whether tracing is on."""
    if _state["tracer"] is not None:
        return True
    if exporter is None and not wanted():
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

    service = os.environ.get("OTEL_SERVICE_NAME") or default_service
    resource = Resource.create({"service.name": service}).merge(OTELResourceDetector().detect())
    provider = TracerProvider(resource=resource)
    # Statements are spans inside a piece of work, never traces of their own: the heartbeat
    # and the sweeps, every few seconds, made ~400 one-span root traces a minute per worker.
    statements = TracerProvider(resource=resource, sampler=ParentBased(root=ALWAYS_OFF))
    if exporter is not None:
        processor: Any = SimpleSpanProcessor(exporter)
    else:
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        if protocol != "http/protobuf":
            log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported here; exporting "
                        "over http/protobuf", protocol)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    statements.add_span_processor(processor)
    if exporter is None:  # a test's provider is its own: the global can be set only once
        trace.set_tracer_provider(provider)
    _instrument_libraries(provider, statements)
    _state["tracer"] = provider.get_tracer("switchyard")
    _state["provider"] = provider
    return True


def _instrument_libraries(provider: Any, statements: Any) -> None:
    """The existing instrumentations: every statement (psycopg, on `statements`, which
    drops those outside any span) and outbound call (httpx)."""
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    psycopg, httpx = PsycopgInstrumentor(), HTTPXClientInstrumentor()
    if not psycopg.is_instrumented_by_opentelemetry:
        psycopg.instrument(tracer_provider=statements)
    if not httpx.is_instrumented_by_opentelemetry:
        httpx.instrument(tracer_provider=provider, request_hook=_only_the_host)


# URL attributes an outbound span may carry, by the semantic conventions' old and new names.
URL_KEYS = ("http.url", "url.full")


def _only_the_host(span: Any, request: Any) -> None:
    """An outbound URL says only its scheme and host: a deploy hook's path or query is its
    secret (the effect's arguments never reach a span), and so may a model server's be."""
    url = request.url  # the instrumentation's RequestInfo: an httpx.URL
    for key in URL_KEYS:
        span.set_attribute(key, f"{url.scheme}://{url.host}")


def instrument_flask(app: Any) -> None:
    """The web's request spans (a no-op when tracing is off)."""
    if enabled():
        from opentelemetry.instrumentation.flask import FlaskInstrumentor

        # The contact confirmation's query string is its credential: no span for it.
        FlaskInstrumentor().instrument_app(app, tracer_provider=_state["provider"],
                                           excluded_urls="/api/contact/confirm")
        if not get_settings().otel_trust_incoming:
            app.wsgi_app = _without_incoming_context(app.wsgi_app)  # outside the instrumentation


INCOMING_CONTEXT = ("HTTP_TRACEPARENT", "HTTP_TRACESTATE", "HTTP_BAGGAGE")


def _without_incoming_context(wsgi_app: Any) -> Any:
    """A tenant's request may carry any trace context: left unread, its request starts a
    trace of its own (and so do the jobs it enqueues), instead of joining one it names."""
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        for key in INCOMING_CONTEXT:
            environ.pop(key, None)
        return wsgi_app(environ, start_response)
    return app


def flush() -> None:
    provider = _state.get("provider")
    if provider is not None:
        provider.force_flush()


def stop() -> None:
    """Tracing off again in this process (tests): the libraries uninstrumented, the spans
    already made flushed."""
    if _state["tracer"] is None:
        return
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    flush()
    for instrumentor in (PsycopgInstrumentor(), HTTPXClientInstrumentor()):
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
    _state.update(tracer=None, provider=None)


def traceparent() -> str | None:
    """The current span's context as a W3C `traceparent`, to store with a job."""
    if not enabled():
        return None
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None,
         parent: str | None = None) -> Iterator[Any]:
    """A span (a child of `parent`, a stored traceparent, when given); nothing when off."""
    tracer = _state["tracer"]
    if tracer is None:
        yield None
        return
    from opentelemetry.propagate import extract
    from opentelemetry.trace import Status, StatusCode

    context = extract({"traceparent": parent}) if parent else None
    with tracer.start_as_current_span(name, context=context,
                                      attributes=dict(attributes or {}),
                                      record_exception=False, set_status_on_exception=False
                                      ) as current:
        try:
            yield current
        except BaseException as exc:
            # A suspension or a retry is the engine at work, not an error: only a failure's
            # class is recorded, never its message (which may quote a tenant's data).
            current.set_attribute("switchyard.outcome", type(exc).__name__)
            if not _expected(exc):
                current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


def _expected(exc: BaseException) -> bool:
    from tasks.engine.errors import CancelRequested, ShutdownRequested, Suspend

    return isinstance(exc, Suspend | CancelRequested | ShutdownRequested)


def annotate(current: Any, attributes: Mapping[str, Any]) -> None:
    if current is not None:
        current.set_attributes(dict(attributes))
