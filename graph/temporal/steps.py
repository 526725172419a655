"""One step of a thread, run by an activity: Ferry's compiled graph, stopped at node boundaries.

A model step stores the turn's input (a question, a decision) if it is not stored yet, then
runs `call_model` and `check`, stopped by `interrupt_after=["check"]`; a tool step runs the
`execute_tool` tasks `check` released, stopped by `interrupt_before=["call_model"]`. Each is
one invocation of the graph, so every checkpoint, message id and stored history is the one an
in-process run writes. A step that is
retried (its worker died) finds what its first attempt stored: the question is not stored twice,
a finished tool call is replayed from its saved write, and a `retry_safe=False` call that had
started is answered "not re-run" from its start record.
"""

from __future__ import annotations

import io
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import HumanMessage
from langgraph.types import Command

from graph.cli.render import (
    Progress,
    RunSummary,
    json_report,
    pending_approvals_of,
    record_update,
)
from graph.run import CAN_APPROVE, RunContext
from graph.temporal.shapes import END, MODEL, TOOLS, StepInput, StepSummary
from graph.threads.lease import WAIT_FOR_THREAD

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import StateSnapshot

    from graph.builder import FerryGraph

STOPS: dict[str, dict[str, list[str]]] = {
    MODEL: {"interrupt_after": ["check"]},
    TOOLS: {"interrupt_before": ["call_model"]},
}
_NODES = ("call_model", "check", "execute_tool")


def step_config(thread_id: str, lease_wait_s: float) -> RunnableConfig:
    """A step's config: the thread, a person can decide (`ferry resume --approve`), and a wait.

    The wait covers a worker that died holding the thread's lease: the retried step waits for
    the lease to expire instead of failing as busy.
    """
    return {
        "configurable": {
            "thread_id": thread_id,
            CAN_APPROVE: True,
            WAIT_FOR_THREAD: lease_wait_s,
        }
    }


def _context(seconds_left: float, budget_s: float) -> RunContext:
    """A run context whose clock says `seconds_left` of the turn's budget remain."""
    context = RunContext()
    # The turn's budget is kept by the workflow (workflow.now()); each step is one invocation
    # of the graph, which must see the time the turn has left, not a fresh budget.
    context.started_at = time.monotonic() - max(budget_s - seconds_left, 0.0)
    return context


def _first_input(graph: FerryGraph, step: StepInput, config: RunnableConfig) -> Any:
    """The step's input, unless an earlier attempt of the same step already stored it."""
    if step.question is None and step.decision is None:
        return None
    state = graph.get_state(config)
    if step.question is not None:
        stored = {m.id for m in (state.values or {}).get("messages", [])}
        if step.message_id in stored:
            return None
        return {"messages": [HumanMessage(step.question, id=step.message_id)]}
    if step.decision is not None and pending_approvals_of(state):
        return Command(resume=step.decision)
    return None


def advance(
    graph: FerryGraph,
    step: StepInput,
    budget_s: float,
    lease_wait_s: float,
    cancelled: threading.Event,
) -> StepSummary:
    """Run one model step or one tool step of the thread; what it did and what comes next."""
    config = step_config(step.thread_id, lease_wait_s)
    graph_input = _first_input(graph, step, config)
    summary, notes = RunSummary(), io.StringIO()
    progress = Progress(out=None, err=notes)
    for _ in range(2):  # a second pass only if the first stopped before doing anything
        worked = _stream(graph, graph_input, config, summary, progress, step, budget_s, cancelled)
        graph_input = None
        state = graph.get_state(config)
        if worked or cancelled.is_set() or not state.next or pending_approvals_of(state):
            break
    return _summary(state, summary, notes.getvalue(), step.thread_id)


def _stream(
    graph: FerryGraph,
    graph_input: Any,
    config: RunnableConfig,
    summary: RunSummary,
    progress: Progress,
    step: StepInput,
    budget_s: float,
    cancelled: threading.Event,
) -> bool:
    """Stream the graph to its next stop, recording what it did; whether a node ran."""
    worked = False
    parts = graph.stream(
        graph_input,
        config,
        stream_mode="updates",
        **STOPS.get(step.kind, STOPS[MODEL]),
        context=_context(step.seconds_left, budget_s),
    )
    try:
        for chunk in parts:
            if cancelled.is_set():  # `ferry cancel`: stop after the running node
                break
            if chunk.get("__metadata__", {}).get("cached"):  # replays of pre-crash results
                continue
            for node, update in chunk.items():
                if node in _NODES:
                    worked = True
                record_update(node, update, summary, progress)
    finally:
        parts.close()
    return worked


def _summary(state: StateSnapshot, summary: RunSummary, notes: str, thread_id: str) -> StepSummary:
    """The step's summary: its counts, lines and the calls it answered, and what runs next."""
    values = cast(dict[str, Any], state.values or {})
    pending = pending_approvals_of(state)
    report = json_report(thread_id, values, summary, pending)
    upcoming = {task.name for task in state.tasks if not task.interrupts}
    after = (
        END
        if pending or not state.next
        else TOOLS
        if "execute_tool" in upcoming and "call_model" not in upcoming
        else MODEL
    )
    return StepSummary(
        next=after,
        model_calls=summary.model_calls,
        usage=dict(summary.usage),
        tool_calls=report["tool_calls"],
        lines=[line for line in notes.splitlines() if line],
        pending_approvals=report.get("pending_approvals", []),
        stop_reason=report["stop_reason"] if after == END else None,
        answer=report["answer"] if after == END else "",
    )
