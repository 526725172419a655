"""Tool results come from Ferry: a client may not supply the result of a call Ferry issued.

A client can send its own ToolMessage as run input or through `update_state` (LangChain's
agent-chat-ui sends "Successfully handled tool call." for a call awaiting approval when the
user types a new message). Stored, it would tell the model a gated tool ran when it never did.
The reducer cannot tell who wrote an update, and `call_model` would see it only once stored,
so `FerryGraph` checks every client write against the stored thread before it is written.

Refused: a result for any call Ferry issued and has not answered, not only for calls awaiting
approval. Every such call is Ferry's to answer: it is waiting for a decision, running in
another run, or was cut short by a crash (a resume runs it, new input repairs it); a result
made up by a client claims an execution that never happened, whichever tool it names.
Results for calls the client itself wrote (a history it imports) are its own business.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolMessage, convert_to_messages
from langgraph.types import Command, StateSnapshot

from graph.guards import unanswered_calls
from graph.hitl import awaiting as held


class ClientToolResultError(ValueError):
    """A client sent the result of a tool call that only Ferry may answer."""


def tool_results_in(update: Any) -> list[ToolMessage]:
    """The tool results a run's input, a `Command` or a state update would write."""
    if isinstance(update, Command):
        update = update.update
    if isinstance(update, dict):
        given = update.get("messages")
    elif isinstance(update, Sequence) and not isinstance(update, str):
        # A Command's update may also be a list of (channel, value) pairs.
        given = [
            v
            for pair in update
            if isinstance(pair, tuple) and pair[0] == "messages"
            for v in (pair[1] if isinstance(pair[1], list) else [pair[1]])
        ]
    else:
        return []
    if not given:
        return []
    try:
        messages = convert_to_messages(given if isinstance(given, list) else [given])
    except (ValueError, TypeError, NotImplementedError):
        return []  # the reducer refuses the same input with its own error
    return [m for m in messages if isinstance(m, ToolMessage)]


def refuse_client_results(results: Sequence[ToolMessage], stored: StateSnapshot) -> None:
    """Raise `ClientToolResultError` if a result answers a call Ferry has issued but not answered.

    Nothing is written then: the call stays pending, its approval pause included.
    """
    if not results:
        return
    pending = {c["id"]: c for c in unanswered_calls(stored.values.get("messages") or [])}
    awaiting = {entry.get("id") for pause in stored.interrupts for entry in held(pause.value)}
    for result in results:
        call = pending.get(result.tool_call_id)
        if call is None:
            continue
        if call["id"] in awaiting:
            raise ClientToolResultError(
                f"tool call {call['id']} ({call['name']}) is awaiting approval; resume with a "
                "decision instead of sending its result"
            )
        raise ClientToolResultError(
            f"tool call {call['id']} ({call['name']}) has no result yet, and only Ferry "
            "supplies it: resume the run to execute it, or send new input without a result for it"
        )
