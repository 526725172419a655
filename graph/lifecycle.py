"""Whether a thread has an unfinished turn: decided from its stored messages, once, for everyone.

`state.next` says what LangGraph planned to run next, but it is empty after Ctrl-C during a
tool or a model call, or a kill between a step's writes and its checkpoint: the turn is then
unfinished although nothing is planned. The messages always tell: a turn is finished when its
last message is the model's (or a guard's) answer with no calls left to run.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from graph.guards import unanswered_calls


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
