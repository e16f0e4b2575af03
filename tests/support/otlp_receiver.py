"""A local OTLP/HTTP trace receiver: what a collector (or Tempo, Jaeger) is to the exporter.
POST /v1/traces with an ExportTraceServiceRequest (protobuf, gzip or not); it keeps each
span's name, ids, attributes and its resource's service.name."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True,
                                   request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True, name="otlp-receiver")
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def names(self) -> list[str]:
        with self._lock:
            return [s.name for s in self.spans]

    def _wsgi(self, environ: dict, start_response: Any) -> Any:
        request = Request(environ)
        if request.method != "POST" or request.path != "/v1/traces":
            return Response("no", status=404)(environ, start_response)
        body = request.get_data()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        got = []
        for rs in export.resource_spans:
            service = next((_value(a.value) for a in rs.resource.attributes
                            if a.key == "service.name"), "")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(ReceivedSpan(service, s.name, s.trace_id.hex(), s.span_id.hex(),
                                            s.parent_span_id.hex(),
                                            {a.key: _value(a.value) for a in s.attributes}))
        with self._lock:
            self.spans.extend(got)
            self.requests += 1
        return Response(ExportTraceServiceResponse().SerializeToString(), status=200,
                        mimetype="application/x-protobuf")(environ, start_response)
