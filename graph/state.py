"""What Ferry stores for a thread: the conversation plus what the guards need."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only on Python 3.12+

_IDS = uuid.UUID("6f1c2d0e-8a57-4a43-9d36-0e1f3c6a9b21")  # namespace of derived message ids
# Each step stores only its new messages. A full snapshot of the list would cost as much as the
# whole history again, so none is taken by count; the one LangGraph asks for every 5000 steps
# is declined by Ferry's SQLite saver when replaying the writes gives the same list.
SNAPSHOT_NEVER = 1_000_000_000

StopReason = Literal[
    "answered",
    "max_iterations",
    "token_budget",
    "cost_budget",
    "time_budget",
    "awaiting_approval",
    "invalid_output",
]


ANSWERED = -1
"""`_result_slot`'s answer for a call that has its result already: nowhere."""


def _result_slot(
    messages: list[AnyMessage], tool_call_id: str, length: int | None = None
) -> int | None:
    """Where the result of `tool_call_id` goes: in its call's block, in the calls' order.

    That is just past the AIMessage that made the call and the results already filed for its
    earlier calls, so results decided or finished out of order (a rejection written at once,
    an approved call's result later) still follow the reply's calls in order. Only the first
    `length` messages are looked at (all of them by default). `ANSWERED` when the block holds
    a result for the call already: a call has exactly one result, whoever writes a second.
    """
    length = len(messages) if length is None else length
    for i in range(length - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, AIMessage):
            continue
        # Calls whose arguments did not parse are sent to providers too, so they count.
        order = {
            call["id"]: k
            for k, call in enumerate([*message.tool_calls, *message.invalid_tool_calls])
        }
        if tool_call_id in order:
            mine, end = order[tool_call_id], i + 1
            while end < length and isinstance(result := messages[end], ToolMessage):
                if result.tool_call_id == tool_call_id:
                    return ANSWERED
                if order.get(result.tool_call_id, -1) > mine:
                    break
                end += 1
            return end
    return None


def _with_stable_ids(position: int, items: list[Any]) -> list[BaseMessage]:
    """The items as messages, each without an id given one derived from where it lands.

    Message history is stored as the writes that built it and rebuilt by replaying them, so an
    id must come out the same on every replay: random ids (what `add_messages` would assign)
    would change each time the thread is read.
    """
    return [
        m
        if m.id
        else m.model_copy(
            update={"id": str(uuid.uuid5(_IDS, f"{position}:{i}:{m.type}:{m.content}"))}
        )
        for i, m in enumerate(convert_to_messages(items))
    ]


def _merge_one(messages: list[AnyMessage], index: dict[str, int], update: Any) -> None:
    """Apply one update in place: replace by id, file a tool result after its call, or append."""
    items = _items(update)
    # Every replayed write, and nearly every live one, is messages that already have ids: they
    # are placed as they are. Anything else (tuples, dicts, id-less messages, removals) is
    # converted first.
    for item in items:
        if not isinstance(item, BaseMessage) or not item.id or isinstance(item, RemoveMessage):
            break
    else:
        for message in items:
            _place(messages, index, message)
        return
    incoming = _with_stable_ids(len(messages), items)
    if any(isinstance(m, RemoveMessage) for m in incoming):  # an edit (e.g. in Studio): rare
        messages[:] = cast(list[AnyMessage], add_messages(cast(Any, messages), cast(Any, incoming)))
        index.clear()
        index.update({m.id or "": i for i, m in enumerate(messages)})
        return
    for message in incoming:
        _place(messages, index, message)


def _place(messages: list[AnyMessage], index: dict[str, int], message: BaseMessage) -> None:
    """Put one message with an id in the history: replace by id, file a tool result, or append."""
    if isinstance(message, BaseMessageChunk):
        message = message_chunk_to_message(message)
    known = index.get(message.id or "")
    if known is not None:
        messages[known] = cast(AnyMessage, message)
        return
    end = _result_slot(messages, message.tool_call_id) if isinstance(message, ToolMessage) else None
    if end == ANSWERED:  # a provider rejects a call with two results: the first one stands
        return
    if end is None or end == len(messages):
        index[message.id or ""] = len(messages)
        messages.append(cast(AnyMessage, message))
    else:
        messages.insert(end, cast(AnyMessage, message))
        index.update({messages[i].id or "": i for i in range(end, len(messages))})


@dataclass(eq=False)
class _Index:
    """The position of every id in `tip`, the latest history the index was updated for.

    It serves every history equal to `tip` or to a prefix of it. Only one fold at a time may
    update it (`busy`); a fold that failed half-way leaves it busy, so it is never used again.
    """

    tip: list[AnyMessage]
    positions: dict[str, int]
    busy: bool = False


class _Indexes:
    """The indexes of the histories the reducer returned last, found by length and last id.

    A fold onto a history takes its index and leaves it, updated, with the new history: the
    ids are indexed once per thread, not once per update. A copy of a history (the saver hands
    out copies) is served by the same index; an older history, by a copy of it cut to length.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[int, Any], _Index] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, messages: list[AnyMessage]) -> tuple[dict[str, int], _Index | None]:
        """Positions of the ids of `messages` to update, and the kept index they belong to."""
        if messages:
            with self._lock:
                kept = self._kept.get(_key(messages))
                if kept is not None and not kept.busy:
                    tip, size = kept.tip, len(messages)
                    if len(tip) == size and (tip is messages or tip == messages):
                        kept.busy = True
                        return kept.positions, kept
                    if len(tip) > size and tip[:size] == messages:
                        positions = dict(kept.positions)
                        for later in tip[size:]:
                            positions.pop(later.id or "", None)
                        return positions, None
        return {m.id or "": i for i, m in enumerate(messages)}, None

    def replayed(self, messages: list[AnyMessage], updates: Sequence[Any]) -> list[Any] | None:
        """`messages` with `updates` applied, if that history is already indexed, else None.

        The saver rebuilds each step's history from the writes the channel has just applied:
        the result is a prefix of the channel's history, and is served by the same index.
        """
        items = [item for update in updates for item in _items(update)]
        with self._lock:
            kept = self._kept.get(_key(messages)) if messages else None
            if kept is None or kept.busy or len(kept.tip) < len(messages) + len(items):
                return None
            tip, size = kept.tip, len(messages)
            if tip[:size] != messages:
                return None
            for at, item in enumerate(items, start=size):
                if not _placed_as_is(item) or (tip[at] is not item and tip[at] != item):
                    return None
                if isinstance(item, ToolMessage):
                    end = _result_slot(tip, item.tool_call_id, at)
                    if end is not None and end != at:
                        return None
            replayed = tip[: size + len(items)]
            self._remember(replayed, kept)
            return replayed

    def keep(
        self, messages: list[AnyMessage], positions: dict[str, int], kept: _Index | None
    ) -> None:
        """Record `positions` as the index of `messages`, which no one may change from now on."""
        if not messages:
            return
        with self._lock:
            if kept is None:
                kept = _Index(messages, positions)
            kept.tip, kept.busy = messages, False
            self._remember(messages, kept)

    def _remember(self, messages: list[AnyMessage], kept: _Index) -> None:
        """File `kept` under `messages` (the lock held), forgetting the oldest beyond the size."""
        self._kept[_key(messages)] = kept
        self._kept.move_to_end(_key(messages))
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)


def _items(update: Any) -> list[Any]:
    return update if isinstance(update, list) else [update]


def _placed_as_is(item: Any) -> bool:
    """Whether an update item goes into the history as it is (a message with an id)."""
    return (
        isinstance(item, BaseMessage)
        and bool(item.id)
        and not isinstance(item, RemoveMessage | BaseMessageChunk)
    )


def _key(messages: list[AnyMessage]) -> tuple[int, Any]:
    """What finds a kept index: the history's length and its last message's id."""
    return len(messages), messages[-1].id or id(messages[-1])


_INDEXES = _Indexes(64)  # histories: more than the threads a process runs at once


def fold_messages(messages: list[AnyMessage], updates: Sequence[Any]) -> list[AnyMessage]:
    """Apply message updates in order, like `add_messages` but filing tool results in place.

    Providers reject a tool call whose result does not follow it directly. When a run dies
    mid-tool and the user asks something new, the repair result arrives after the new question;
    placing it inside its call's block keeps the stored history valid for every later reader.
    This is the delta channel's reducer: rebuilding a thread folds all its writes in one call,
    so the cost stays linear in the number of messages.
    """
    # A new list: the old one may be held elsewhere (a streamed value, a state snapshot), and
    # copying its pointers is cheap; indexing its ids is not, so the index is carried over.
    replayed = _INDEXES.replayed(messages, updates)
    if replayed is not None:
        return replayed
    merged = list(messages)
    positions, kept = _INDEXES.take(messages)
    for update in updates:
        _merge_one(merged, positions, update)
    _INDEXES.keep(merged, positions, kept)
    return merged


def merge_messages(left: list[AnyMessage], right: Any) -> list[AnyMessage]:
    """Merge one update into a history (see `fold_messages`)."""
    return fold_messages(left, [right])


def count_failures(current: dict[str, int], outcomes: dict[str, bool]) -> dict[str, int]:
    """Update consecutive-failure counts per tool: a failure adds one, a success resets."""
    counts = dict(current)
    for tool, ok in outcomes.items():
        counts[tool] = 0 if ok else counts.get(tool, 0) + 1
    return counts


class Summary(TypedDict):
    """What the model is told of the turns left out of its prompt (graph/prompt.py)."""

    text: str
    start: int
    """The first message summarised (just past the thread's first user message)."""
    through: int
    """The messages `start` to `through` (excluded) are summarised."""
    compactions: list[int]
    """`through` of every compaction so far, oldest first: where `ferry history` marks them."""


class FerryState(TypedDict, total=False):
    """The checkpointed state of one thread."""

    messages: Annotated[
        list[AnyMessage], DeltaChannel(fold_messages, snapshot_frequency=SNAPSHOT_NEVER)
    ]
    """The whole conversation, every message with a stable id.

    The guards' per-turn counters (model calls, tokens) are read from it rather than stored
    beside it: the replies since the turn's user message are the count, and their usage the
    tokens, so they survive a crash exactly as the messages do.
    """
    stop_reason: StopReason | None
    """Why the last turn ended; None while it runs."""
    tool_failures: Annotated[dict[str, int], count_failures]
    """Consecutive failures per tool on this thread, for the circuit breaker."""
    summary: Summary | None
    """What the model is told of the turns left out of its prompt (graph/prompt.py)."""
    structured_response: Any
    """The turn's answer in the run's answer schema (graph/output.py), as plain JSON; None
    without a schema, or while the turn runs."""
    answer_schema: dict[str, Any] | None
    """The JSON schema a run sent for its turn's answer (`configurable["response_format"]`),
    kept with the turn so that resuming it answers in the same schema."""
    released_calls: str
    """Marks of the calls `check` last let run, space-separated, keyed and spent at the next
    model call; `execute_tool` runs no other (graph.policy.releases)."""


class FerryInput(TypedDict):
    """What a run takes: the new messages (usually one user message)."""

    messages: list[AnyMessage]


class FerryOutput(TypedDict, total=False):
    """What a run returns: the whole conversation, why the turn ended, its structured answer."""

    messages: list[AnyMessage]
    stop_reason: StopReason | None
    structured_response: Any
