"""Ferry's spans, exported over OTLP/HTTP: imported only once tracing is on (graph/tracing).

**One trace per turn, across processes.** A turn can run in several invocations — `ferry ask`
then `ferry resume --approve` a day later, or one Temporal step per model call, each on any
worker — and no memory is shared between them. So the ids are derived, not propagated: the
trace id and the span id of the turn's first span are a hash of the thread id and the id of
the turn's question, a message every later invocation reads from the stored thread. The
invocation that stores the question is the turn's root span (`invoke_agent ferry`) with
exactly those ids; every later one is a child of it by the same computation.

**What a span carries.** Ids (Ferry's and the GenAI conventions'), names of models and tools,
token counts, and the type of an error — never tool arguments, results, message text or an
error's message: any of those can hold a secret or a private tool's data, and a collector
is another place they would travel to.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import logging
import os
from collections.abc import AsyncGenerator, Iterator
from contextlib import AbstractContextManager, aclosing, contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import AIMessage
from langgraph.errors import GraphBubbleUp
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode, TraceFlags

from graph.core.run import RunContext

if TYPE_CHECKING:  # graph/tracing imports this module: the types only, no cycle
    from graph.tracing import Turn

log = logging.getLogger("ferry.tracing")
T = TypeVar("T")

AGENT = "ferry"
_wanted: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "ferry_turn_ids", default=None
)


class _TurnIds(RandomIdGenerator):
    """Random ids, except while a turn's root span is started: the ids derived for it."""

    def generate_trace_id(self) -> int:
        wanted = _wanted.get()
        return wanted[0] if wanted else super().generate_trace_id()

    def generate_span_id(self) -> int:
        wanted = _wanted.get()
        return wanted[1] if wanted else super().generate_span_id()


def turn_ids(thread_id: str | None, question_id: str) -> tuple[int, int]:
    """The trace id and the root span id of the turn started by the message `question_id`.

    The thread is in the hash because a client may give its messages ids of its own, the same
    in two threads.
    """
    digest = hashlib.sha256(f"{thread_id or ''}\0{question_id}".encode()).digest()
    # Zero is the one invalid value of each; a hash of 0 is as likely as guessing the key.
    return int.from_bytes(digest[:16]) or 1, int.from_bytes(digest[16:24]) or 1


@functools.cache
def _tracer(endpoints: tuple[str, ...]) -> trace.Tracer:
    """Ferry's tracer, one per endpoint setting, its spans batched and sent by the SDK.

    Ferry's own provider, not the global one: an application's own set-up neither gets
    Ferry's derived ids nor loses its own. The SDK flushes the batch at exit (`atexit`).
    """
    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf") != "http/protobuf":
        log.warning("Ferry exports traces over OTLP/HTTP (protobuf) only, whatever the protocol")
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": AGENT}))
    provider = TracerProvider(resource=resource, id_generator=_TurnIds())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _providers.append(provider)
    return provider.get_tracer("ferry", _version())


_providers: list[TracerProvider] = []


def flush() -> None:
    """Send every span batched so far, now."""
    for provider in _providers:
        provider.force_flush()


def _version() -> str | None:
    try:
        return version("ferry-agent")
    except PackageNotFoundError:
        return None


def tracer() -> trace.Tracer:
    """The tracer for the endpoints the environment names now (graph/tracing's `ENDPOINTS`)."""
    endpoints = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    return _tracer(tuple(os.environ.get(name, "") for name in endpoints))


def _ferry_ids(ids: dict[str, Any]) -> dict[str, Any]:
    thread_id = ids.get("thread_id")
    attributes = {"ferry.run_id": ids.get("run_id")}
    if thread_id is not None:
        attributes |= {"ferry.thread_id": str(thread_id), "gen_ai.conversation.id": str(thread_id)}
    return {k: v for k, v in attributes.items() if v is not None}


def invocation_span(context: RunContext, turn: Turn) -> Span:
    """Start the invocation's span: the turn's root if it stores the question, else its child."""
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT,
        "ferry.resumed": not turn.asked,
        **_ferry_ids({"thread_id": turn.thread_id, "run_id": context.run_id}),
    }
    if turn.question_id:
        attributes["ferry.question_id"] = turn.question_id
    name = f"invoke_agent {AGENT}"
    # A caller's span (an application's request) is linked, never the parent: the turn's
    # trace is the turn's alone, whoever runs its next step.
    caller = trace.get_current_span().get_span_context()
    links = [Link(caller)] if caller.is_valid else None
    if turn.question_id is None:  # a thread-less run: a trace of its own
        return tracer().start_span(name, Context(), attributes=attributes, links=links)
    trace_id, root_id = turn_ids(turn.thread_id, turn.question_id)
    if turn.asked:
        token = _wanted.set((trace_id, root_id))
        try:
            return tracer().start_span(name, Context(), attributes=attributes, links=links)
        finally:
            _wanted.reset(token)
    root = SpanContext(
        trace_id, root_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    parent = trace.set_span_in_context(trace.NonRecordingSpan(root), Context())
    return tracer().start_span(name, parent, attributes=attributes, links=links)


@contextmanager
def _ended(span: Span) -> Iterator[Span]:
    """`span` for a block: ended however it ends, failed with the type of what leaves it.

    A reader that stops a stream (`GeneratorExit`) and an interrupt (`GraphBubbleUp`: the call
    runs again on resume) are no failures.
    """
    try:
        yield span
    except GeneratorExit:
        raise
    except GraphBubbleUp:
        span.set_attribute("ferry.interrupted", True)
        raise
    except BaseException as exc:
        failed(span, type(exc).__name__)
        raise
    finally:
        span.end()


def traced(parts: Iterator[T], context: RunContext, turn: Turn) -> Iterator[T]:
    """Yield `parts` inside the invocation's span, ended however the stream ends."""
    with _ended(invocation_span(context, turn)) as span:
        context.span = span
        yield from parts


async def atraced(
    parts: AsyncGenerator[T, None], context: RunContext, turn: Turn
) -> AsyncGenerator[T, None]:
    """Yield `parts` inside the invocation's span, ended however the stream ends."""
    with _ended(invocation_span(context, turn)) as span:
        context.span = span
        async with aclosing(parts) as stream:
            async for part in stream:
                yield part


def _child(parent: Any, name: str, attributes: dict[str, Any]) -> AbstractContextManager[Span]:
    """A span inside `parent`, for a block (`_ended`)."""
    context = trace.set_span_in_context(parent, Context())
    return _ended(tracer().start_span(name, context, attributes=attributes))


def model_span(parent: Any, ids: dict[str, Any]) -> AbstractContextManager[Span]:
    """A `chat` span for one model call; its name gets the model once the reply names it."""
    return _child(parent, "chat", {"gen_ai.operation.name": "chat", **_ferry_ids(ids)})


def describe_reply(span: Span, reply: AIMessage, *, cut_short: bool) -> None:
    """The reply's model, provider, tokens and finish, as the GenAI conventions name them."""
    metadata = reply.response_metadata
    model = metadata.get("model_name") or metadata.get("model")
    attributes: dict[str, Any] = {"ferry.tool_calls": len(reply.tool_calls)}
    if model:
        span.update_name(f"chat {model}")
        attributes["gen_ai.response.model"] = str(model)
    if metadata.get("ferry_model"):  # the spec a fallback chose (graph/models/fallback.py)
        attributes["ferry.model"] = str(metadata["ferry_model"])
    if metadata.get("model_provider"):
        attributes["gen_ai.provider.name"] = str(metadata["model_provider"])
    finish = metadata.get("finish_reason") or metadata.get("stop_reason")
    if finish:
        attributes["gen_ai.response.finish_reasons"] = [str(finish)]
    usage = reply.usage_metadata
    if usage:
        details = usage.get("input_token_details") or {}
        attributes |= {
            "gen_ai.usage.input_tokens": usage["input_tokens"],
            "gen_ai.usage.output_tokens": usage["output_tokens"],
        }
        if details.get("cache_read"):
            attributes["gen_ai.usage.cache_read.input_tokens"] = details["cache_read"]
        if details.get("cache_creation"):
            attributes["gen_ai.usage.cache_creation.input_tokens"] = details["cache_creation"]
    span.set_attributes(attributes)
    if cut_short:
        failed(span, "cut_short")


def tool_span(parent: Any, ids: dict[str, Any]) -> AbstractContextManager[Span]:
    """An `execute_tool` span for one tool call: its name and call id, never its arguments."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": ids["tool"],
        "gen_ai.tool.call.id": ids["tool_call_id"],
        "gen_ai.tool.type": "function",
        "ferry.tool_call_id": ids["tool_call_id"],
        **_ferry_ids(ids),
    }
    return _child(parent, f"execute_tool {ids['tool']}", attributes)


def failed(span: Span, error_type: str) -> None:
    """Mark `span` failed: `error.type` and an error status, never the error's message."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR))
