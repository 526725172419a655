"""What a thread's messages say about its tool calls: the turn, the calls, their results.

Helpers every part of Ferry reads messages with (the loop, the policies, time travel), so they
import nothing of the agent.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)


def turn_start(messages: Sequence[AnyMessage]) -> int:
    """Index of the user message that started the current turn (0 if there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return 0


def all_calls(message: AIMessage) -> list[ToolCall]:
    """Every call of a reply, those whose arguments did not parse included (with no args).

    Providers are sent the unparsed ones too (langchain-openai as `tool_calls`, langchain-
    anthropic as `tool_use` blocks), so each needs a result like any other call.
    """
    invalid = [
        ToolCall(name=c.get("name") or "", args={}, id=c.get("id"), type="tool_call")
        for c in message.invalid_tool_calls
    ]
    return [*message.tool_calls, *invalid]


def unanswered_calls(messages: Sequence[BaseMessage]) -> list[ToolCall]:
    """Calls of the latest tool-calling reply that no tool result answers.

    Only the latest can lack results: every model call repairs the history before it, so any
    earlier reply's calls were answered (or repaired) before the model spoke again. For the
    same reason a reply without calls ends the search: the calls before it were answered.
    Only the messages after the latest reply are looked at, however long the thread.
    """
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            return [call for call in all_calls(message) if call["id"] not in answered]
    return []


def error_result(call: ToolCall, text: str) -> ToolMessage:
    """An error tool result answering `call`."""
    return ToolMessage(
        text, tool_call_id=call["id"] or "", name=call["name"], status="error", id=str(uuid.uuid4())
    )
