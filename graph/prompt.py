"""What the model is sent: the stored history, bounded (the stored history stays whole)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from graph.fence import FENCE_PROMPT, fenced
from graph.guards import turn_start

SYSTEM_PROMPT = (
    "You are Ferry, a careful assistant with tools. Use a tool when it gives a better answer than "
    "memory (current facts, weather, time, files, arithmetic); call independent tools in "
    "parallel. When a tool fails, read its error: fix the arguments, try another tool, or answer "
    "with what you know and say what is missing. " + FENCE_PROMPT
)
MAX_RESULT_CHARS = 16_000
OMITTED = "[Older tool result omitted to keep the prompt small; call the tool again if needed.]"


def _as_sent(message: ToolMessage) -> ToolMessage:
    """A result as the model sees it: cut if long, fenced as data (the cut noted outside)."""
    text = message.text
    if len(text) <= MAX_RESULT_CHARS:
        return fenced(message)
    note = (
        f"\n[Truncated for the model: {len(text) - MAX_RESULT_CHARS} more characters. "
        "Ask for a smaller part, e.g. read_file with start_line and max_lines.]"
    )
    return fenced(message.model_copy(update={"content": text[:MAX_RESULT_CHARS]}), note)


def for_model(messages: Sequence[AnyMessage], context_tokens: int) -> list[BaseMessage]:
    """The prompt: system prompt + history, results fenced and cut, oldest dropped if too big.

    Only tool results' contents shrink, so a call and its result are never split apart and the
    latest user turn is always sent whole.
    """
    sent: list[BaseMessage] = [SystemMessage(SYSTEM_PROMPT)]
    sent += [_as_sent(m) if isinstance(m, ToolMessage) else m for m in messages]
    # LangChain's estimate: about four characters a token, tool calls included; the sum of the
    # messages' own estimates, so one result's share can be taken out again.
    total = count_tokens_approximately(sent)
    current_turn = turn_start(messages) + 1  # +1: the system prompt comes first
    for i in range(1, current_turn):
        if total <= context_tokens:
            break
        message = sent[i]
        if isinstance(message, ToolMessage):
            sent[i] = _omitted(message)
            total -= count_tokens_approximately([message]) - count_tokens_approximately([sent[i]])
    return sent


@lru_cache(maxsize=20_000)
def _placeholder(
    message_id: str, tool_call_id: str, name: str | None, status: Literal["success", "error"]
) -> ToolMessage:
    return ToolMessage(OMITTED, tool_call_id=tool_call_id, name=name, id=message_id, status=status)


def _omitted(message: ToolMessage) -> ToolMessage:
    """The placeholder sent instead of an old result; made once per message, not per call."""
    if message.id is None:
        return message.model_copy(update={"content": OMITTED})
    return _placeholder(message.id, message.tool_call_id, message.name, message.status)
