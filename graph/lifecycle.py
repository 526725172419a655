"""What runs next: the edges out of `check`, and whether a thread has an unfinished turn.

The edges send each call still to run to its own `execute_tool` task, else back to the model or
to the end. Whether a turn is unfinished is decided from the stored messages, once, for everyone:
`state.next` says what LangGraph planned to run next, but it is empty after Ctrl-C during a
tool or a model call, or a kill between a step's writes and its checkpoint: the turn is then
unfinished although nothing is planned. The messages always tell: a turn is finished when its
last message is the model's (or a guard's) answer with no calls left to run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langgraph.types import Command, Send, StateSnapshot, StateUpdate

from graph.core.messages import unanswered_calls
from graph.state import FerryState


class ToolTask(TypedDict):
    """What `check` sends to one `execute_tool` task."""

    call: ToolCall
    failures: int
    """The tool's consecutive failures so far on this thread."""


def route_after_check(state: FerryState) -> list[Send] | Literal["call_model", "__end__"]:
    """Send each call that still needs a result to `execute_tool`; else back to the model or end."""
    if state.get("stop_reason"):
        return "__end__"
    messages = state["messages"]
    block = len(messages) - 1
    while block > 0 and isinstance(messages[block], ToolMessage):
        block -= 1
    reply = messages[block]
    answered = {m.tool_call_id for m in messages[block + 1 :] if isinstance(m, ToolMessage)}
    assert isinstance(reply, AIMessage)  # check only lets tool-calling replies through
    pending = [c for c in reply.tool_calls if c["id"] not in answered]
    if pending:
        failures = state.get("tool_failures") or {}
        return [
            Send("execute_tool", ToolTask(call=c, failures=failures.get(c["name"], 0)))
            for c in pending
        ]
    return "call_model"


def unfinished_turn(messages: Sequence[BaseMessage]) -> bool:
    """Whether the latest turn still needs the model or a tool to finish.

    True when the last message is a user message (the model never answered), an AI message
    with calls that have no result, or a tool result the model has not seen yet.
    """
    if not messages:
        return False
    last = messages[-1]
    if isinstance(last, HumanMessage | ToolMessage):
        return True
    return isinstance(last, AIMessage) and bool(unanswered_calls(messages))


def continuation(state: StateSnapshot) -> Command[Any] | None:
    """The input that completes an unfinished turn nothing is planned for; None if not needed.

    When LangGraph has a task planned or saved (finished results, an approval waiting), a run
    without input already continues from it. Otherwise the turn goes on where its messages
    say: calls never checked go to `check` (refusals, approvals and budgets apply, then they
    run); results the model has not seen, after the block's missing calls run, go to the
    model; a question no one answered goes to the model. A stale stop reason is cleared, as
    the model node does at a new turn, so the edges do not end the run at once.
    """
    values: Mapping[str, Any] = state.values or {}
    messages = values.get("messages") or []
    if state.tasks or not messages:
        return None
    last = messages[-1]
    if not unfinished_turn(messages):
        # An answer stored just before a kill, never checked: `check` records why the turn
        # ended (its stop reason) and the run ends there.
        unchecked = isinstance(last, AIMessage) and values.get("stop_reason") is None
        return Command(goto="check") if unchecked else None
    if isinstance(last, AIMessage):
        return Command(update={"stop_reason": None}, goto="check")
    if isinstance(last, ToolMessage):
        goto = route_after_check({**values, "stop_reason": None})  # type: ignore[typeddict-item]  # a snapshot's values are the state's
        return Command(update={"stop_reason": None}, goto=goto)
    return Command(update={"stop_reason": None}, goto="call_model")


def run_has_work(state: StateSnapshot) -> bool:
    """Whether a run without input would do anything on this thread.

    Steps planned or saved (a kill right after a step's writes, before its checkpoint, leaves
    them with nothing planned), an approval waiting, or an unfinished turn `continuation`
    completes. `state.next` alone is empty after Ctrl-C or a kill mid-step.
    """
    return bool(state.next or state.tasks) or continuation(state) is not None


def finished_results(state: StateSnapshot) -> list[StateUpdate]:
    """What the steps that finished before a run died wrote, to store ahead of new input.

    New input starts a fresh step, and LangGraph drops the unfinished step's saved writes with
    it: a model reply would vanish (two user messages in a row), and calls that ran would be
    answered "no result". Stored as the writes of the nodes that made them, they are kept.
    """
    return [
        StateUpdate(task.result, task.name, task.id)
        for task in state.tasks
        if isinstance(task.result, dict) and not task.interrupts
    ]
