"""OpenTelemetry traces of turns, model calls and tool calls, on only where OTLP is configured.

With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, every
invocation of the graph is a span, and each model call and tool call it makes a span inside
it; graph/tracing/otel.py builds them. Unset, that module is never imported, and each hook
below costs one look at a field: whether tracing is on is decided once per invocation, here,
and the nodes only see whether the invocation has a span.

A turn is one trace, whichever process or worker runs its invocations: the trace's id comes
from the turn's question as stored in the thread (otel.py says how), not from memory.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.types import Command

from graph.core.run import RunContext

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("ferry.tracing")
T = TypeVar("T")

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""The standard variables that turn tracing on: where the OTLP/HTTP collector listens."""
_OFF: AbstractContextManager[None] = nullcontext()


@dataclass(frozen=True)
class Turn:
    """Which turn an invocation belongs to, as far as the stored thread says."""

    thread_id: str | None
    question_id: str | None
    """The id of the user message that started the turn; None for a thread-less run."""
    asked: bool
    """Whether this invocation stores the question (it starts the turn) or continues it."""


def enabled() -> bool:
    """Whether an OTLP endpoint is set and the SDK is not disabled by its standard variables."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(os.environ.get(name, "").strip() for name in ENDPOINTS)


@dataclass(frozen=True, slots=True)
class Invocation:
    """What an invocation of the graph starts from: all tracing needs to place it in its turn."""

    context: RunContext
    graph_input: Any
    """The input as admitted (graph/provenance.py): new messages have their ids."""
    stored: Any
    """The thread's state before the run, or None."""
    config: Any

    def turn(self) -> Turn:
        """The turn it runs: a question in its input, else the stored turn's question."""
        thread_id = (self.config or {}).get("configurable", {}).get("thread_id")
        thread_id = None if thread_id is None else str(thread_id)
        given = self.graph_input
        given = given.update if isinstance(given, Command) else given
        if isinstance(given, Mapping):
            asked = _last_question(given.get("messages") or [])
            if asked is not None:
                return Turn(thread_id, asked, asked=True)
        messages = (getattr(self.stored, "values", None) or {}).get("messages") or []
        return Turn(thread_id, _last_question(messages), asked=False)


def _last_question(messages: list[BaseMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.id
    return None


def traced(parts: Iterator[T], invocation: Invocation) -> Iterator[T]:
    """`parts` (a run's stream) inside the invocation's span; itself if tracing is off."""
    if not _on():
        return parts
    from graph.tracing import otel

    return otel.traced(parts, invocation.context, invocation.turn())


def atraced(parts: AsyncGenerator[T, None], invocation: Invocation) -> AsyncGenerator[T, None]:
    """`parts` (a run's async stream) inside the invocation's span, or itself if tracing is off."""
    if not _on():
        return parts
    from graph.tracing import otel

    return otel.atraced(parts, invocation.context, invocation.turn())


def model_call(
    context: RunContext | None, ids: dict[str, Any]
) -> AbstractContextManager[Span | None]:
    """A span around one model call, inside the invocation's; nothing when tracing is off."""
    if context is None or context.span is None:
        return _OFF
    from graph.tracing import otel

    return otel.model_span(context.span, ids)


def describe_reply(span: Span | None, reply: AIMessage, *, cut_short: bool) -> None:
    """Put the reply's model, provider, token counts and finish on its span."""
    if span is not None:
        from graph.tracing import otel

        otel.describe_reply(span, reply, cut_short=cut_short)


def tool_call(
    context: RunContext | None, ids: dict[str, Any]
) -> AbstractContextManager[Span | None]:
    """A span around one tool call, inside the invocation's; nothing when tracing is off."""
    if context is None or context.span is None:
        return _OFF
    from graph.tracing import otel

    return otel.tool_span(context.span, ids)


def describe_result(span: Span | None, status: str) -> None:
    """Mark the tool call's span failed if its result is an error."""
    if span is not None and status == "error":
        from graph.tracing import otel

        otel.failed(span, "tool_error")


def flush() -> None:
    """Send the spans batched so far, now; the SDK also sends them when the process exits.

    For a program that cannot wait for its exit (a serverless handler, `os._exit`).
    """
    otel = sys.modules.get("graph.tracing.otel")
    if otel is not None:
        otel.flush()


def _on() -> bool:
    """Whether tracing is on and OpenTelemetry is installed (said once if it is not)."""
    if not enabled():
        return False
    try:
        from graph.tracing import otel  # noqa: F401 - imported to know it can be
    except ImportError as exc:  # the `otel` extra is missing: the run goes on, untraced
        _say_once(
            f"{ENDPOINTS[1]} is set but OpenTelemetry is not installed ({exc.name}): "
            "install ferry-agent[otel]; running without traces"
        )
        return False
    return True


_said: set[str] = set()


def _say_once(line: str) -> None:
    if line not in _said:
        _said.add(line)
        log.warning(line)
