"""The edges out of `check`: one `execute_tool` task per call still to run, or on."""

from __future__ import annotations

from typing import Literal, TypedDict

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.types import Send

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
