"""Tool calls and results come from Ferry: what a client may and may not write or route.

Tool calls run only when `check` released them. A client can route a run itself (a
`Command(goto=Send("execute_tool", …))` from Python, a run's `command.goto` through the server)
or write as a node (`update_state(as_node="check")`), and either would reach the tool without
`check`'s approval, guards and exfiltration guard. So `check` records a mark of each call it
lets run (`released_calls`: its id, tool and arguments, hashed), `execute_tool` runs a call
only if the thread's latest reply asks for it unanswered and a mark matches, and clients may
neither `goto` nor write the marks. Resuming (`Command(resume=…)`) and updates stay theirs.

Tool results come from Ferry too: a client may not supply the result of a call Ferry issued.

A client can send its own ToolMessage as run input or through `update_state` (LangChain's
agent-chat-ui sends "Successfully handled tool call." for a call awaiting approval when the
user types a new message). Stored, it would tell the model a gated tool ran when it never did.
The reducer cannot tell who wrote an update, and `call_model` would see it only once stored,
so `FerryGraph` checks every client write against the stored thread before it is written.

Never stored: a result for any call Ferry issued and has not answered, not only for calls
awaiting approval. Every such call is Ferry's to answer: it is waiting for a decision, running
in another run, or was cut short by a crash (a resume runs it, new input repairs it); a result
made up by a client claims an execution that never happened, whichever tool it names. Sent with
a new message (agent-chat-ui's way), it is dropped and logged, and the run goes on with the
message, as it would have without it: refusing the run showed the user no answer, no card and
no error. Sent alone, as a `Command`'s update or through `update_state`, it is refused, since
nothing else would happen. Results for calls the client itself wrote (a history it imports)
are its own business.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage, convert_to_messages
from langgraph.types import Command, StateSnapshot

from graph.guards import unanswered_calls
from graph.policy.hitl import awaiting as held

log = logging.getLogger("ferry.loop")

RELEASED = "released_calls"
"""The state key under which `check` records the calls it let run."""
GOTO_REFUSED = (
    "a run's command may resume or update the thread, not goto: the graph decides what runs "
    "next, and a tool call runs only after Ferry's check released it"
)
NOT_RELEASED = (
    "Not executed: this call reached the tool without passing Ferry's checks (approval, "
    "guards, exfiltration guard); only calls the model asked for and Ferry released run."
)


class ClientToolResultError(ValueError):
    """A client sent the result of a tool call that only Ferry may answer."""


class ClientCommandError(ValueError):
    """A client's command would decide what runs next, which only the graph's edges do."""


class UnreleasedCallError(ValueError):
    """A tool task for a call no stored reply is waiting for: nothing may be written for it."""


def release_mark(call: Mapping[str, Any]) -> str:
    """What `check` records for a call it lets run: its id, tool and arguments, hashed."""
    text = json.dumps([call["id"], call["name"], call["args"]], sort_keys=True, default=str)
    # 64 bits: only `check` writes marks, so a mark need not resist forgery, only collisions.
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def unreleased(task: Any, state: Mapping[str, Any]) -> str | None:
    """Why `execute_tool` may not run this task's call, for the model to read; None if it may.

    A call the latest reply asks for but `check` did not release (or released with other
    arguments) is answered with `NOT_RELEASED`, so the thread stays valid for the provider.

    Raises:
        UnreleasedCallError: the task is malformed, or no stored reply waits for its call.
    """
    call = task.get("call") if isinstance(task, Mapping) else None
    if not isinstance(call, Mapping) or not {"id", "name", "args"} <= call.keys():
        raise UnreleasedCallError(f"a tool task must carry a tool call, got {task!r:.200}")
    waiting = {c["id"]: c for c in unanswered_calls(state.get("messages") or [])}
    asked = waiting.get(call["id"])
    if asked is None:
        raise UnreleasedCallError(
            f"tool call {call['id']!r} ({call['name']}): no reply on the thread waits for it; "
            "a tool runs only for a call the model made and Ferry's check released"
        )
    marks = (state.get(RELEASED) or "").split()
    mark = release_mark(call)
    return None if mark in marks and mark == release_mark(asked) else NOT_RELEASED


def refuse_client_command(graph_input: Any) -> None:
    """Raise `ClientCommandError` for a run input that routes the run or writes release marks.

    Raises:
        ClientCommandError: a `Command` with `goto`, or an update of `released_calls`.
    """
    if isinstance(graph_input, Command):
        if graph_input.goto:
            raise ClientCommandError(GOTO_REFUSED)
        refuse_release_writes(graph_input.update)


def refuse_release_writes(update: Any) -> None:
    """Raise `ClientCommandError` if a client's update would write `check`'s release marks.

    Raises:
        ClientCommandError: the update names `released_calls`.
    """
    if isinstance(update, Mapping):
        keys = set(update)
    elif isinstance(update, Sequence) and not isinstance(update, str):
        keys = {pair[0] for pair in update if isinstance(pair, tuple) and pair}
    else:
        return
    if RELEASED in keys:
        raise ClientCommandError(
            f"{RELEASED} is written by Ferry's check alone: it says which tool calls may run"
        )


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
    pending, awaiting = _pending_calls(stored), _awaiting(stored)
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


def without_client_results(
    graph_input: dict[str, Any], stored: StateSnapshot, ids: Mapping[str, Any]
) -> dict[str, Any]:
    """The run's input without the results it makes up for calls Ferry has not answered.

    Each one dropped is logged, by call id (its content may be anything). An input of nothing
    else is refused instead: the run would have nothing new to go on with.

    Args:
        graph_input: The run's input, its messages already converted (`FerryGraph`).
        stored: The thread as stored before the run.
        ids: The run's thread and run ids, for the log line.

    Raises:
        ClientToolResultError: the input holds nothing but such results.
    """
    results = tool_results_in(graph_input)
    pending = _pending_calls(stored)
    made_up = {r.tool_call_id for r in results if r.tool_call_id in pending}
    if not made_up:
        return graph_input
    given = graph_input["messages"]
    kept = [
        m
        for m in (given if isinstance(given, list) else [given])
        if not (isinstance(m, ToolMessage) and m.tool_call_id in made_up)
    ]
    if not kept:
        refuse_client_results(results, stored)
    awaiting = _awaiting(stored)
    for call_id in sorted(made_up):
        why = "awaits approval" if call_id in awaiting else "has not run"
        log.info(
            "dropped a result the client sent for tool call %s (%s), which %s: only Ferry "
            "answers the calls it made",
            call_id,
            pending[call_id]["name"],
            why,
            extra={**ids, "event": "client_result_dropped", "tool_call_id": call_id},
        )
    return {**graph_input, "messages": kept}


def _pending_calls(stored: StateSnapshot) -> dict[str | None, Any]:
    """The calls Ferry issued on the stored thread and has not answered, by id."""
    return {c["id"]: c for c in unanswered_calls(stored.values.get("messages") or [])}


def _awaiting(stored: StateSnapshot) -> set[Any]:
    """The ids of the calls the stored thread's pause waits on a decision for."""
    return {entry.get("id") for pause in stored.interrupts for entry in held(pause.value)}
