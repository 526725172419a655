"""Time travel on a stored thread: its checkpoints, a fork into a new thread, undoing a turn.

LangGraph keeps every checkpoint of a thread; a new head on an older one (a copy, `__copy__`)
is how it goes back, and the old head stays reachable by its id. `undo` makes the checkpoint a
turn started from the head again; `fork` writes the state at a checkpoint into a new thread,
the original untouched. Both are Ferry's own writes of what the thread stored, past the gate
clients pass (graph/provenance.py), and hold the thread's lease meanwhile.

Neither undoes what a tool did: a file a tool wrote stays written, and a forked or undone turn
asked again runs its tools again (after approval, if they need it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot, StateUpdate

from graph.core.messages import unanswered_calls
from graph.threads.lease import holding


class TravelError(ValueError):
    """A fork or undo that cannot be made; the message is one line naming what to change."""


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a thread's current line, as `ferry history --checkpoints` lists it."""

    checkpoint_id: str
    created_at: str | None
    step: int
    messages: int
    next: tuple[str, ...]
    happened: str
    """What the step that wrote it did, in a few words."""

    def as_json(self) -> dict[str, Any]:
        """The checkpoint as `--json` prints it."""
        return {**asdict(self), "next": list(self.next)}


def checkpoints(graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str) -> list[Checkpoint]:
    """The checkpoints from the thread's start to its head, oldest first.

    Only the current line: checkpoints a fork or undo left behind are reachable by id, not
    listed.
    """
    line = _line(graph, thread_id)
    listed, before = [], 0
    for snapshot in line:
        messages = snapshot.values.get("messages") or []
        listed.append(
            Checkpoint(
                checkpoint_id=_id(snapshot.config),
                created_at=snapshot.created_at,
                step=int(snapshot.metadata.get("step", -1)) if snapshot.metadata else -1,
                messages=len(messages),
                next=tuple(snapshot.next),
                happened=_happened(snapshot, messages[before:]),
            )
        )
        before = len(messages)
    return listed


def fork(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    thread_id: str,
    checkpoint_id: str,
    to: str | None = None,
) -> str:
    """Start thread `to` (a new id unless given) from `thread_id` as it was at a checkpoint.

    The new thread goes on as the original would have from there: a reply paused for approval
    pauses again at its next run. Returns the new thread's id.
    """
    snapshot = _at(graph, thread_id, checkpoint_id)
    values = snapshot.values
    if not values.get("messages"):
        raise TravelError(
            f"checkpoint {checkpoint_id} of thread {thread_id} holds no messages yet: fork from "
            "a later one (see `ferry history --thread ID --checkpoints`)"
        )
    if "execute_tool" in snapshot.next:
        raise TravelError(
            f"checkpoint {checkpoint_id} is between check and the tools, whose release belongs "
            "to this thread: fork from the checkpoint before it (the model's reply, with check "
            "next), and the new thread decides the calls again"
        )
    target = to or str(uuid.uuid4())
    config: RunnableConfig = {"configurable": {"thread_id": target}}
    with holding(graph, config):
        if graph.get_state(config).values:
            raise TravelError(f"thread {target} exists already: fork into a new id")
        as_node = _leading_to(snapshot)
        copied = {
            "messages": values["messages"],
            "stop_reason": values.get("stop_reason"),
            "summary": values.get("summary"),  # the compaction reused, not recomputed
        }
        CompiledStateGraph.bulk_update_state(graph, config, [[StateUpdate(copied, as_node)]])
        if "execute_tool" in graph.get_state(config).next:  # never past check: not ours to make
            graph.checkpointer.delete_thread(target)  # type: ignore[union-attr]
            raise TravelError(
                f"checkpoint {checkpoint_id} cannot be forked: its calls were released"
            )
    return target


def _leading_to(snapshot: StateSnapshot) -> str:
    """The node the fork writes as, so that what comes next is what came next there.

    Calls without a result (a pause) are decided by `check` again; a finished turn ends (its
    stop reason is copied); otherwise the model is asked next. An input checkpoint holds the
    state before its input: as the turn it ends.
    """
    messages = snapshot.values.get("messages") or []
    if snapshot.next == ("check",) or unanswered_calls(messages):
        return "call_model"
    if snapshot.next == ("call_model",):
        return "execute_tool"
    return "check" if snapshot.values.get("stop_reason") else "execute_tool"


def undo(graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str) -> tuple[str, str]:
    """Take back the thread's last turn: a new head on the checkpoint it started from.

    Returns (the undone head's checkpoint id, the question of the turn taken back).
    """
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    with holding(graph, config):
        line = _line(graph, thread_id)
        head = line[-1]
        messages = head.values.get("messages") or []
        asked = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        question = messages[asked[-1]] if asked else None
        # The turn started at the last checkpoint without its question: a run's input, or a
        # message written as an edit (Studio's fork). Input checkpoints hold their input as
        # pending writes, not yet in their messages: they are not where a turn stands. By id:
        # results filed in earlier blocks (a repaired pause) move the question's position.
        before = [
            s
            for s in line
            if question is not None
            and (s.metadata or {}).get("source") != "input"
            and question.id not in {m.id for m in s.values.get("messages") or []}
            # Not where released calls wait: a new head there would run them, undecided now.
            and "execute_tool" not in s.next
            and not s.values.get("released_calls")
        ]
        if not before:  # no turn, or the first one: there is nothing before it to go back to
            raise TravelError(
                f"thread {thread_id} has one turn: nothing is before it to go back to (delete "
                f"the thread with `ferry delete --thread {thread_id}`)"
            )
        question = _short(messages[asked[-1]].text)
        CompiledStateGraph.bulk_update_state(
            graph, before[-1].config, [[StateUpdate(None, "__copy__")]]
        )
    return _id(head.config), question


def _line(graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str) -> list[StateSnapshot]:
    """The head and its ancestors, oldest first; a one-line error for an unknown thread."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    by_id = {_id(s.config): s for s in graph.get_state_history(config)}
    if not by_id:
        raise TravelError(f"unknown thread {thread_id!r} (see `ferry threads`)")
    head = graph.get_state(config)
    line: list[StateSnapshot] = []
    at: StateSnapshot | None = by_id.get(_id(head.config))
    while at is not None:
        line.append(at)
        at = by_id.get(_id(at.parent_config)) if at.parent_config else None
    return line[::-1]


def _at(
    graph: CompiledStateGraph[Any, Any, Any, Any], thread_id: str, checkpoint_id: str
) -> StateSnapshot:
    """The thread's checkpoint with this id or a unique prefix of it."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    found = [s for s in graph.get_state_history(config) if _id(s.config).startswith(checkpoint_id)]
    if not checkpoint_id or not found:
        raise TravelError(
            f"thread {thread_id!r} has no checkpoint {checkpoint_id!r} (see `ferry history "
            f"--thread {thread_id} --checkpoints`)"
        )
    if len(found) > 1:
        raise TravelError(f"{checkpoint_id!r} names {len(found)} checkpoints: give more of the id")
    return found[0]


def _id(config: RunnableConfig | None) -> str:
    return str((config or {}).get("configurable", {}).get("checkpoint_id", ""))


def _happened(snapshot: StateSnapshot, new: list[BaseMessage]) -> str:
    """What the step that wrote `snapshot` did: the messages it added, or where it stands."""
    said = list(_described(new))
    if snapshot.interrupts:
        said.append("paused for approval")
    if said:
        return "; ".join(said)
    source = (snapshot.metadata or {}).get("source")
    if "execute_tool" in snapshot.next:
        return "check let the calls run"
    if not snapshot.next and snapshot.values.get("stop_reason"):
        return f"turn ended ({snapshot.values['stop_reason']})"
    if source == "input":
        return "new input"
    if source == "fork":
        return "a copy of an earlier checkpoint (fork or undo)"
    return "started" if snapshot.metadata and snapshot.metadata.get("step") == -1 else "-"


def _described(messages: list[BaseMessage]) -> Iterator[str]:
    for message in messages:
        if isinstance(message, HumanMessage):
            yield f"asked: {_short(message.text)}"
        elif isinstance(message, AIMessage) and message.tool_calls:
            yield "called " + ", ".join(call["name"] for call in message.tool_calls)
        elif isinstance(message, AIMessage):
            yield f"answered: {_short(message.text)}"
        elif isinstance(message, ToolMessage):
            yield f"{message.name or 'tool'} {'failed' if message.status == 'error' else 'ran'}"


def _short(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
