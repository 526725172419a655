"""The one gate every client write passes: only the shapes known to be safe, nothing else.

A client writes to a thread through a run's input, a `Command` (update, goto, resume), or a
state update (`update_state` / `bulk_update_state` with any `as_node`, the server's
`supersteps` on thread creation and update, copies and forks from older checkpoints). Each
way could route a run to a tool past `check`, write Ferry's bookkeeping, or store a made-up
result. `FerryGraph` hands every one of them to `admit_run` or `admit_updates` before it is
written, and those accept only:

- new messages (`{"messages": [...]}`), the one key a person may write or edit;
- a resume value, which answers a pause and writes nothing else;
- a `goto` to the end at an approval pause (agent-chat-ui's "Mark as Resolved"): the held
  calls are answered "not run", as a typed message answers them;
- state updates of `messages` as one of the graph's nodes (Studio's edits), or a copy of a
  checkpoint (a fork) carrying such updates.

Everything else is refused with one line: a key Ferry keeps (`released_calls`, `stop_reason`,
`tool_failures`, and any key added later), a `goto` anywhere else, a `Send`, a task id, a
write path's shape nobody listed here, a run again from a checkpoint between check and the
tools that the thread went on from (its releases were spent there). What is admitted is
rebuilt from plain values read once (LangChain's own message types, JSON for a resume), so
the client's objects never reach the graph. The tool node itself still trusts no route: it
runs a call only with a release `check` made (graph/policy/releases.py).

Tool results come from Ferry alone: a client's result for a call on the stored thread
(pending, answered or cut short) claims an execution that never happened, or is a second
result a provider rejects. Sent with new messages (agent-chat-ui sends "Successfully handled
tool call." for a call it still sees open), it is dropped and logged and the run goes on with
the messages; sent alone, it is refused, since nothing else would happen. Results for calls
the same write brings (a history a client imports) are its own, as long as their ids are new:
a stored reply sent back (or copied under a new id) does not make its calls the client's, and
a call id is used by one reply only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.constants import END
from langgraph.types import Command, StateSnapshot, StateUpdate

from graph.core.hitl import awaiting as held
from graph.core.messages import error_result, unanswered_calls
from graph.lifecycle import continuation, finished_results
from graph.policy.approval import UNDECIDED

log = logging.getLogger("ferry.loop")

OFFERED = "ferry_memories"
"""`response_metadata` key of a reply: the memories offered with its prompt (graph/nodes.py)."""
EDITABLE = frozenset({"messages"})
"""The state keys a client may write: the conversation. Ferry's bookkeeping is its own."""
NODES = frozenset({"call_model", "check", "execute_tool"})
COPY, INPUT = "__copy__", "__input__"
_MESSAGE_TYPES = (HumanMessage, AIMessage, SystemMessage, ToolMessage, RemoveMessage)
GOTO_REFUSED = (
    "a run's command may resume a paused thread, update its messages, or goto the end at an "
    "approval pause (Mark as Resolved); the graph decides what runs next, and a tool call "
    "runs only after Ferry's check released it"
)
RESOLVED = (
    "Not executed: the user ended the turn at the approval pause (Mark as Resolved) without "
    "a decision on this call. Do not call it again unless the user asks for it."
)


class ClientWriteError(ValueError):
    """A client's write Ferry refuses: its shape is not one a client may write."""


class ClientCommandError(ClientWriteError):
    """A client's command or update would decide what runs next or write Ferry's bookkeeping."""


class ClientToolResultError(ClientWriteError):
    """A client sent the result of a tool call that only Ferry may answer."""


@dataclass
class Admitted:
    """What a run goes on with once its input passed the gate."""

    graph_input: Any
    store_first: list[StateUpdate] = field(default_factory=list)
    """Ferry's own writes, stored before the run (past the gate: they are not a client's)."""


def command_shape_error(command: Command[Any]) -> str | None:
    """Why a run's command is refused whatever the thread holds, or None if its shape is safe.

    Safe: a resume alone, an update alone, or a goto to the end alone.
    """
    return _shape_error(*_fields(command))


def _shape_error(update: Any, goto: Any, resume: Any) -> str | None:
    given = {"update": update, "goto": goto, "resume": resume}
    parts = [name for name, value in given.items() if _given(value)]
    if len(parts) > 1:
        return f"{GOTO_REFUSED}; one at a time, got {' and '.join(parts)}"
    if parts == ["goto"] and _gotos(goto) != [END]:
        return GOTO_REFUSED
    return None


def _fields(command: Command[Any]) -> tuple[Any, Any, Any]:
    """A command's update, goto and resume, each read once (a subclass may compute them)."""
    if command.graph is not None:
        raise ClientCommandError("a run's command may not address another graph")
    return command.update, command.goto, command.resume


def admit_run(
    graph_input: Any,
    stored: StateSnapshot | None,
    ids: Mapping[str, Any],
    *,
    behind_head: bool = False,
) -> Admitted:
    """Admit a run's input, or raise `ClientWriteError`; `stored` is None for a thread-less run.

    New messages first store what the steps that finished before a crash wrote; no input
    completes an unfinished turn even when nothing is planned for it. `behind_head`: the run
    starts from a checkpoint the thread has gone on from (a replay).

    What goes on is built here from plain values read once: the client's own objects (a
    `Command` or mapping subclass that answers differently each time it is asked) never pass.
    """
    if graph_input is None:
        _refuse_spent_replay(stored, behind_head)
        return Admitted(continuation(stored) if stored else None)
    if isinstance(graph_input, Mapping):
        given = _messages_only(graph_input, "a run's input")
        kept = _without_client_results(given, stored, ids)
        return Admitted({"messages": _with_ids(kept)}, finished_results(stored) if stored else [])
    if not isinstance(graph_input, Command):
        raise ClientWriteError(
            f"a run's input is {{'messages': [...]}}, a Command or None, not "
            f"{type(graph_input).__name__}"
        )
    update, goto, resume = _fields(graph_input)
    problem = _shape_error(update, goto, resume)
    if problem:
        raise ClientCommandError(problem)
    if _given(resume):  # a value for a pause only: it writes nothing itself
        _refuse_spent_replay(stored, behind_head)
        return Admitted(Command(resume=_plain(resume)))
    if _given(goto):
        return Admitted(None, [_resolution(stored)])
    given = _messages_only(_as_mapping(update), "a command's update")
    _refuse_client_results(given, stored)
    return Admitted(Command(update={"messages": _with_ids(given)}))


def admit_updates(
    supersteps: Sequence[Sequence[StateUpdate]], stored: StateSnapshot
) -> list[list[StateUpdate]]:
    """Admit a client's state updates as they are, or raise `ClientWriteError`.

    Each update writes messages as one of the graph's nodes; a copy of a checkpoint (a fork)
    may carry such updates. A `Command` carrying only an update is its update.
    """
    return [[_admitted_update(update, stored) for update in step] for step in supersteps]


def _admitted_update(update: Sequence[Any], stored: StateSnapshot) -> StateUpdate:
    values, as_node = update[0], update[1]
    task_id = update[2] if len(update) > 2 else None
    if task_id is not None:
        raise ClientCommandError(
            "a state update may not name a task: which step a write completes is Ferry's to say"
        )
    if (stored.values or {}).get("released_calls"):
        # Released calls are spent at the next model call: until then, a write here could take
        # a call's result away and send the call back to the tools under the same release.
        raise ClientCommandError(
            "a state update may not be written where released tool calls are pending or not "
            "yet spent (between check and the model's next call): resume the thread first, or "
            "write at the checkpoint before the model's reply"
        )
    if "execute_tool" in {task.name for task in stored.tasks}:
        # Written (or copied) there, the checkpoint's released calls would run a second time
        # in the new branch: a release is spent once.
        raise ClientCommandError(
            "a state update may not be written where released tool calls are pending (a run "
            "cut short mid-tool, or a checkpoint between check and the tools): resume the "
            "thread, or write at the checkpoint before the model's reply"
        )
    if as_node == COPY and values is None:
        return StateUpdate(None, COPY)
    if as_node == COPY and isinstance(values, list):
        inner = [_admitted_update(item, stored) for item in values]
        # LangGraph's copy takes its updates as (values, as_node) pairs in place of values.
        pairs: Any = [(u.values, u.as_node) for u in inner]
        return StateUpdate(pairs, COPY)
    if as_node is not None and as_node not in NODES | {INPUT}:
        raise ClientCommandError(
            f"a state update may be written as {', '.join(sorted(NODES))} or as input "
            f"(or none: the last node), not as {as_node!r}"
        )
    if as_node in {task.name for task in stored.tasks}:
        # Written as a pending step's node, the update would complete that step: a pause
        # would vanish undecided, a tool call would go unrun.
        raise ClientCommandError(
            f"a state update may not be written as {as_node}, whose step is pending on this "
            "thread (paused or cut short): resume the thread instead"
        )
    if isinstance(values, Command):
        update, goto, resume = _fields(values)
        if _given(goto) or _given(resume):
            raise ClientCommandError(
                "a state update may carry a Command with an update only; resume or route a "
                "thread with a run"
            )
        values = _as_mapping(update)
    given = _messages_only(values, "a state update")
    _refuse_client_results(given, stored)
    return StateUpdate({"messages": given}, as_node)


def _messages_only(values: Any, what: str) -> list[BaseMessage]:
    """The messages `values` writes, rebuilt as LangChain's own message types.

    Refuses any other key, and what is not a message. The mapping is read once and every
    message rebuilt from its fields, so what the rest of the gate checks is what is stored.
    """
    if not isinstance(values, Mapping):
        raise ClientCommandError(
            f"{what} writes {{'messages': [...]}}, not {type(values).__name__}"
        )
    values = dict(values.items())
    others = sorted(set(values) - EDITABLE, key=str)
    if others:
        raise ClientCommandError(
            f"{what} may write only messages; {', '.join(map(str, others))} "
            f"{'is' if len(others) == 1 else 'are'} Ferry's to write"
        )
    given = values.get("messages")
    if given is None:
        raise ClientWriteError(f"{what} has no messages: send {{'messages': [...]}}")
    try:
        items = given if isinstance(given, list) else [given]
        read = [message_chunk_to_message(m) for m in convert_to_messages(list(items))]
        messages = messages_from_dict(messages_to_dict(read))
    except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
        raise ClientWriteError(f"{what}: its messages could not be read: {exc}") from None
    for message in messages:
        if type(message) not in _MESSAGE_TYPES:
            raise ClientWriteError(
                f"{what}: a {message.type!r} message is not one a client may write "
                "(user, assistant, system and tool messages are)"
            )
    return messages


def _with_ids(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages, each without an id given a new one, once checked.

    Given after the checks, a client's own ids are the only ones that can name a stored message.
    A run's input is stored as given and replayed whenever the thread is read: with its ids
    fixed here, every replay yields the same messages.
    """
    for message in messages:
        message.id = message.id or str(uuid.uuid4())
    return messages


def _as_mapping(update: Any) -> Any:
    """A command's update as a mapping: a list of (key, value) pairs merged, messages joined."""
    if not isinstance(update, list | tuple):
        return update
    merged: dict[Any, Any] = {}
    for pair in update:
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise ClientCommandError(f"a command's update pair must be (key, value), got {pair!r}")
        key, value = pair
        if key == "messages":
            merged.setdefault(key, []).extend(value if isinstance(value, list) else [value])
        else:
            merged[key] = value
    return merged


def _issued_calls(stored: StateSnapshot | None) -> dict[str, str]:
    """Every call on the stored thread, by id: Ferry answers each of them, and once."""
    messages = (stored.values.get("messages") if stored else None) or []
    return {
        call["id"] or "": call["name"] or ""
        for message in messages
        if isinstance(message, AIMessage)
        for call in [*message.tool_calls, *message.invalid_tool_calls]
    }


def _client_results(messages: list[BaseMessage], stored: StateSnapshot | None) -> set[str]:
    """The ids of the calls on the stored thread that `messages` bring a result for.

    A reply the client sends again (its own id, or a copy under a new one) does not make its
    calls the client's: they were issued on the thread, and Ferry answers them.
    """
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    if not results:
        return set()
    issued = _issued_calls(stored)
    return {call_id for call_id in results if call_id in issued}


def _refuse_edited_calls(messages: list[BaseMessage], stored: StateSnapshot | None) -> None:
    """Refuse a write that removes or rewrites what Ferry stored of a tool call.

    A client may edit what was said (Studio's edits of a user or assistant message), not which
    calls a stored reply made, nor a stored result: either would leave a call with no result or
    two, or send it back to the tools. A result must answer a call the thread or the same write
    made: an orphan is a history no provider accepts.
    """
    stored_messages = (stored.values.get("messages") if stored else None) or []
    # One pass over the thread, for the ids the client gave: a new question comes without one.
    wanted = {m.id for m in messages if m.id}
    by_id = {m.id: m for m in stored_messages if m.id in wanted} if wanted else {}
    answerable: set[Any] = set()
    if any(isinstance(m, ToolMessage) for m in messages):
        answerable = {*_issued_calls(stored), *(i for m in messages for i in _call_ids(m))}
    for message in messages:
        before = by_id.get(message.id) if message.id else None
        if isinstance(message, RemoveMessage) and (_carries_calls(before) or _offered(before)):
            raise ClientWriteError(
                f"message {message.id} holds tool calls, a tool result, or the record of what "
                "the model was shown, which only Ferry writes: it may not be removed (undo the "
                "turn instead: ferry undo)"
            )
        if _offered(before) and _offered(message) != _offered(before):
            raise ClientWriteError(
                f"message {message.id} records the memories the model was shown "
                f"({OFFERED} in its response_metadata): an edit keeps that record as it is"
            )
        if isinstance(before, ToolMessage) and not isinstance(message, RemoveMessage):
            raise ClientToolResultError(
                f"message {message.id} is the result of tool call {before.tool_call_id}, which "
                "only Ferry writes: it may not be replaced"
            )
        if before is not None and _calls(before) != _calls(message):
            raise ClientWriteError(
                f"message {message.id} is stored with its tool calls (or none): an edit may "
                "change what a message says, not which calls it makes nor their arguments"
            )
        if isinstance(message, ToolMessage) and message.tool_call_id not in answerable:
            raise ClientToolResultError(
                f"a tool result for call {message.tool_call_id} answers no call on this thread "
                "or in the same write"
            )


def _call_ids(message: BaseMessage) -> list[Any]:
    """The ids of the calls a message makes, those whose arguments did not parse included."""
    return [call[0] for call in _calls(message)]


def _calls(message: BaseMessage) -> list[tuple[Any, Any, Any]]:
    """The calls a message makes, as (id, name, arguments), unparsed ones included."""
    if not isinstance(message, AIMessage):
        return []
    parsed = [(c["id"], c["name"], c["args"]) for c in message.tool_calls]
    return parsed + [(c["id"], c["name"], c["args"]) for c in message.invalid_tool_calls]


def _offered(message: BaseMessage | None) -> Any:
    """The memories a stored reply records its model was shown (graph/nodes.py), if any."""
    return message.response_metadata.get(OFFERED) if isinstance(message, AIMessage) else None


def _carries_calls(message: BaseMessage | None) -> bool:
    return isinstance(message, ToolMessage) or (
        isinstance(message, AIMessage) and bool(message.tool_calls)
    )


def _refuse_reused_calls(messages: list[BaseMessage], stored: StateSnapshot | None) -> None:
    """Refuse a reply that reuses a call id: each id names one call, answered once.

    A copy of a stored reply under a new id would give its calls a second block to be answered
    in; the stored reply itself, sent again under its own id, replaces it (an edit).
    """
    replies = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    if not replies:
        return
    by_reply = {
        call["id"]: message.id
        for message in (stored.values.get("messages") if stored else None) or []
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    }
    seen: set[Any] = set()
    for message in replies:
        for call in message.tool_calls:
            call_id = call["id"]
            reused = call_id in by_reply and by_reply[call_id] != message.id
            if call_id in seen or reused:
                raise ClientWriteError(
                    f"tool call id {call_id} is used by another reply on this thread already; "
                    "each call needs an id of its own"
                )
            seen.add(call_id)


def _refuse_client_results(messages: list[BaseMessage], stored: StateSnapshot | None) -> None:
    _refuse_edited_calls(messages, stored)
    _refuse_reused_calls(messages, stored)
    made_up = _client_results(messages, stored)
    if made_up:
        raise ClientToolResultError(_why_refused(sorted(made_up)[0], stored))


def _without_client_results(
    messages: list[BaseMessage], stored: StateSnapshot | None, ids: Mapping[str, Any]
) -> list[BaseMessage]:
    """`messages` without the results they make up; refused if nothing else is left."""
    _refuse_edited_calls(messages, stored)
    _refuse_reused_calls(messages, stored)
    made_up = _client_results(messages, stored)
    if not made_up:
        return messages
    kept = [m for m in messages if not (isinstance(m, ToolMessage) and m.tool_call_id in made_up)]
    if not kept:
        raise ClientToolResultError(_why_refused(sorted(made_up)[0], stored))
    issued, awaiting = _issued_calls(stored), _awaiting(stored)
    pending = _pending(stored)
    for call_id in sorted(made_up):
        why = (
            "awaits approval"
            if call_id in awaiting
            else "has not run"
            if call_id in pending
            else "has its result already"
        )
        log.info(
            "dropped a result the client sent for tool call %s (%s), which %s: only Ferry "
            "answers the calls it made",
            call_id,
            issued[call_id],
            why,
            extra={**ids, "event": "client_result_dropped", "tool_call_id": call_id},
        )
    return kept


def _why_refused(call_id: str, stored: StateSnapshot | None) -> str:
    name = _issued_calls(stored).get(call_id, "")
    if call_id in _awaiting(stored):
        return (
            f"tool call {call_id} ({name}) is awaiting approval; resume with a decision "
            "instead of sending its result"
        )
    if call_id in _pending(stored):
        return (
            f"tool call {call_id} ({name}) has no result yet, and only Ferry supplies it: "
            "resume the run to execute it, or send new input without a result for it"
        )
    return f"tool call {call_id} ({name}) has its result already, and a call has only one"


def _pending(stored: StateSnapshot | None) -> set[Any]:
    """The ids of the calls on the stored thread that have no result yet."""
    messages = (stored.values.get("messages") if stored else None) or []
    return {call["id"] for call in unanswered_calls(messages)}


def _awaiting(stored: StateSnapshot | None) -> set[Any]:
    """The ids of the calls the stored thread's pause waits on a decision for."""
    if stored is None:
        return set()
    return {entry.get("id") for pause in stored.interrupts for entry in held(pause.value)}


def _resolution(stored: StateSnapshot | None) -> StateUpdate:
    """What "Mark as Resolved" stores at an approval pause: every open call answered, the end.

    Raises:
        ClientCommandError: the thread is not paused for approval.
    """
    awaiting = _awaiting(stored)
    if stored is None or not awaiting:
        raise ClientCommandError(
            "goto the end (Mark as Resolved) ends an approval pause, and the thread is not "
            "paused for approval"
        )
    open_calls = unanswered_calls(stored.values.get("messages") or [])
    results = [error_result(c, UNDECIDED if c["id"] in awaiting else RESOLVED) for c in open_calls]
    return StateUpdate({"messages": results, "stop_reason": "answered"}, "check")


def _given(value: Any) -> bool:
    """Whether a `Command` field was given (LangGraph's default for each is empty).

    Only an exact empty tuple, list or dict is empty: a subclass could compare equal to one
    and still carry a write.
    """
    return value is not None and not (type(value) in (tuple, list, dict) and not value)


def _plain(value: Any) -> Any:
    """`value` rebuilt from JSON's types alone, so what was checked is what goes on."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, Mapping):
        return {str.__str__(_key(k)): _plain(v) for k, v in list(value.items())}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        return str.__str__(value)
    raise ClientWriteError(
        f"a resume value is JSON (objects, arrays, strings, numbers), not {type(value).__name__}"
    )


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise ClientWriteError(f"a resume value's keys are strings, not {type(key).__name__}")
    return key


def _refuse_spent_replay(stored: StateSnapshot | None, behind_head: bool) -> None:
    """Refuse to run on (no input, or a resume) from a checkpoint the thread has gone on from.

    What came next there was decided and done already: its releases, and its pause's decision.
    Run again, an approved call would run a second time. New messages from such a checkpoint
    start a fork (time travel); `ferry fork` makes a new thread from it.
    """
    if behind_head and stored is not None:
        raise ClientCommandError(
            "a run may not go on from a checkpoint the thread has gone on from (what came next "
            "there, its calls and decisions, happened already): send new messages from it, fork "
            "it (ferry fork), or run the thread's latest checkpoint"
        )


def _gotos(goto: Any) -> list[Any]:
    return list(goto) if isinstance(goto, list | tuple) else [goto]
