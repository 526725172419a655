"""An OTLP/HTTP trace receiver on loopback: `POST /v1/traces`, protobuf, as collectors take it."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.support.servers.base import LoopbackServer, Reply, Request


@dataclass(frozen=True)
class Span:
    """One span received, its ids as hex (`parent_id` empty for a root)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status: int  # 0 unset, 1 ok, 2 error
    links: list[tuple[str, str]]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class OtlpServer(LoopbackServer):
    """Takes OTLP/HTTP protobuf trace exports; `spans()` decodes all received so far."""

    def handle(self, request: Request) -> Reply:
        if request.path != "/v1/traces" or request.method != "POST":
            return super().handle(request)
        if request.headers.get("content-type") != "application/x-protobuf":
            return Reply(415, "OTLP/HTTP protobuf only")
        self._decode(request)  # a body that does not parse fails here, loudly
        body = ExportTraceServiceResponse().SerializeToString()
        return Reply(200, body, headers={"Content-Type": "application/x-protobuf"})

    @staticmethod
    def _decode(request: Request) -> ExportTraceServiceRequest:
        body = request.body
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        decoded = ExportTraceServiceRequest()
        decoded.ParseFromString(body)
        return decoded

    def bodies(self) -> list[bytes]:
        """The raw export bodies, uncompressed: what left the process."""
        raw = []
        for request in self.requests_to("/v1/traces"):
            body = request.body
            if request.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            raw.append(body)
        return raw

    def spans(self) -> list[Span]:
        found = []
        for request in self.requests_to("/v1/traces"):
            for resource_spans in self._decode(request).resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(
                            Span(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                resource=resource,
                                status=span.status.code,
                                links=[(ln.trace_id.hex(), ln.span_id.hex()) for ln in span.links],
                            )
                        )
        return found
