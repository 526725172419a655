"""One step of a thread, run by an activity: Ferry's compiled graph, up to one model call's end.

A step is one invocation of the graph stopped by `interrupt_after=["check"]`: it runs the
`execute_tool` tasks the last `check` released (none in a turn's first step), then `call_model`
and `check`. So a turn of n tool rounds is n + 1 steps, one a model call, and every checkpoint,
message id and stored history is the one an in-process run writes. The first step stores the
turn's input (a question, a decision). A step that is retried (its worker died) finds what its
first attempt stored: the question is not stored twice, a finished tool call is replayed from
its saved write, and a `retry_safe=False` call that had started is answered "not re-run" from
its start record.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.types import Command

from graph.core.run import CAN_APPROVE, RunContext
from graph.output import RUN_KEY
from graph.runs.progress import record_update
from graph.runs.report import message_ids, pending_approvals_of, turn_report
from graph.temporal.shapes import END, STEP, StepInput, StepSummary
from graph.threads.lease import WAIT_FOR_THREAD

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langchain_core.runnables import RunnableConfig
    from langgraph.types import StateSnapshot

    from graph.builder import FerryGraph
    from graph.core.settings import ModelPrice, Settings

_NODES = ("call_model", "check", "execute_tool")


class StepOutput:
    """What a step shows, in order: progress lines and model replies (`StepSummary.output`).

    Each item names its step (`step`, the activity's id and attempt), so a watcher that saw
    some of a step's items while it ran (its heartbeats, graph/temporal/worker.py) is handed
    only the rest when it ends. It stands in for the CLI's `Progress`, whose `note` it records;
    written by the step's thread, read by the activity's heartbeat.
    """

    def __init__(self, step: str = "") -> None:
        self.step = step
        self._lock = threading.Lock()
        self._items: list[dict[str, str]] = []
        self._reply, self._text = "", ""

    def note(self, line: str) -> None:
        """A progress line."""
        with self._lock:
            self._items.append({"step": self.step, "line": line})

    def reply(self, message: AIMessage) -> None:
        """A model reply, whole."""
        if message.text:
            with self._lock:
                self._items.append(
                    {"step": self.step, "reply": message.id or "", "text": message.text}
                )

    def token(self, reply_id: str, text: str) -> None:
        """A piece of the reply the model is writing (a new id starts a new reply)."""
        with self._lock:
            if reply_id != self._reply:
                self._reply, self._text = reply_id, ""
            self._text += text

    def items(self) -> list[dict[str, str]]:
        """The lines and whole replies so far."""
        with self._lock:
            return list(self._items)

    def now(self) -> dict[str, Any]:
        """What a heartbeat carries: the items so far and the reply being written."""
        with self._lock:
            return {
                "step": self.step,
                "output": list(self._items),
                "reply": self._reply,
                "text": self._text,
            }


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


def _first_input(graph: FerryGraph, step: StepInput, config: RunnableConfig, retried: bool) -> Any:
    """The step's input, unless an earlier attempt of the same step already stored it."""
    if step.question is not None:
        question = {"messages": [HumanMessage(step.question, id=step.message_id)]}
        if not retried:  # the thread is only read when an earlier attempt may have stored it
            return question
        stored = {m.id for m in (graph.get_state(config).values or {}).get("messages", [])}
        return None if step.message_id in stored else question
    if step.decision is not None and pending_approvals_of(graph.get_state(config)):
        return Command(resume=step.decision)
    return None


def advance(
    graph: FerryGraph,
    step: StepInput,
    settings: Settings,
    cancelled: threading.Event,
    retried: bool = False,
    output: StepOutput | None = None,
) -> StepSummary:
    """Run one step of the thread; what it did and what comes next.

    `settings`: the worker's, read once (its time budget, lease timeout and prices);
    `retried`: an earlier attempt of this step may have run; `output` records what the step
    shows as it goes, with the reply's tokens if `step.stream`.
    """
    budget_s = settings.time_budget_s
    # A dead holder's lease expires within its timeout: a retried step outwaits it.
    config = step_config(step.thread_id, settings.lease_timeout_s + 5.0)
    if step.response_format is not None:  # the turn's answer schema (graph/output.py)
        config["configurable"][RUN_KEY] = json.loads(step.response_format)
    since = step.since if step.since is not None else _start_of_turn(graph, step, config)
    graph_input = _first_input(graph, step, config, retried)
    output = output or StepOutput()
    # Another pass while no model call ran: a decision resumes `check`, which then stops at
    # its own `interrupt_after`, and a stored stop may be met before any node runs.
    for _ in range(3):
        ran = _stream(graph, graph_input, config, output, step, budget_s, cancelled)
        graph_input = None
        state = graph.get_state(config)
        if (
            "call_model" in ran
            or cancelled.is_set()
            or not state.next
            or pending_approvals_of(state)
        ):
            break
    return _summary(graph, state, output, step.thread_id, since, settings.prices)


def _stream(
    graph: FerryGraph,
    graph_input: Any,
    config: RunnableConfig,
    output: StepOutput,
    step: StepInput,
    budget_s: float,
    cancelled: threading.Event,
) -> set[str]:
    """Stream the graph to its next stop, recording what it did; the nodes that ran."""
    ran: set[str] = set()
    parts = graph.stream(
        graph_input,
        config,
        stream_mode=["updates", "messages"] if step.stream else ["updates"],
        interrupt_after=["check"],
        context=_context(step.seconds_left, budget_s),
    )
    try:
        for mode, chunk in cast("Any", parts):
            if cancelled.is_set():  # `ferry cancel`: stop after the running node
                break
            if mode == "messages":
                message, meta = chunk
                if (
                    isinstance(message, AIMessageChunk)
                    and meta.get("langgraph_node") == "call_model"
                ):
                    output.token(message.id or "", message.text)
                continue
            if chunk.get("__metadata__", {}).get("cached"):  # replays of pre-crash results
                continue
            for node, update in chunk.items():
                if node in _NODES:
                    ran.add(node)
                record_update(node, update, output)
    finally:
        parts.close()
    return ran


def _start_of_turn(graph: FerryGraph, step: StepInput, config: RunnableConfig) -> str:
    """The checkpoint a turn's first step starts from: the latest without its question.

    Before the question is stored that is the thread's head; a retried first step (the first
    attempt stored it) finds it further back, so every attempt reports the same invocation.
    The head is read alone first: the history is listed (every checkpoint of the thread, read
    whole) only when the head already holds the question.
    """
    head = graph.get_state(config)
    if step.message_id is None or step.message_id not in message_ids(head):
        return _checkpoint_id(head)
    for state in graph.get_state_history(config):
        ids = message_ids(state)
        if step.message_id is None or step.message_id not in ids:
            return _checkpoint_id(state)
    return ""


def _checkpoint_id(state: StateSnapshot) -> str:
    return str((state.config or {}).get("configurable", {}).get("checkpoint_id") or "")


def _summary(
    graph: FerryGraph,
    state: StateSnapshot,
    output: StepOutput,
    thread_id: str,
    since: str,
    prices: Mapping[str, ModelPrice],
) -> StepSummary:
    """The step's summary: the invocation's report so far, its output, and what runs next.

    The report is read from the stored thread beyond `since` (graph/runs/report.py), so a
    retried step or a step on another worker reports what an in-process run would.
    """
    after = END if pending_approvals_of(state) or not state.next else STEP
    if after == STEP:  # the workflow reads the report where the turn stops or pauses only
        return StepSummary(
            next=STEP, output=output.items(), since=since, checkpoint=_checkpoint_id(state)
        )
    before: frozenset[str] = frozenset()
    if since:
        at = {"configurable": {"thread_id": thread_id, "checkpoint_id": since}}
        before = message_ids(graph.get_state(cast("RunnableConfig", at)))
    report = turn_report(thread_id, state, before, prices)
    return StepSummary(
        next=after,
        report=report,
        pending_approvals=report.get("pending_approvals", []),
        output=output.items(),
        since=since,
        checkpoint=_checkpoint_id(state),
    )
