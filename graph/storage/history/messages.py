"""A thread's messages in both engines: which histories are Ferry's, folding, what is cached.

The SQLite and Postgres savers rebuild `messages` the same way: find the checkpoint a config
names (or the thread's newest), fold the writes since the nearest known history with the
agent's reducer, and hand LangGraph the folded list as the seed. Only when the history holds
Ferry's messages (`are_messages`) and no edit replaced it (`Overwrite`): anything else is left
to LangGraph's generic rebuild, with the graph's own reducer.

A checkpoint never changes once written, so the history at a checkpoint stays true: a saver
caches the ones it rebuilt or built (the most recent `CACHED`, `CachedHistories`), in SQLite
and Postgres alike. A new checkpoint's history is its parent's with the `messages` writes put
at the parent; when this process put the parent, every write at it came through this saver,
so the new history is folded from what the writes were given, and nothing is read back
(`StepsPutHere`, SQLite's). A parent another process put (a run resumed after a crash, with
some of its tasks' writes stored before) is read from the database.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id, writes_sort_key
from langgraph.types import Overwrite

from graph.storage.internals import DeltaChannelHistory, DeltaSnapshot, snapshot_value

if TYPE_CHECKING:
    from graph.storage.history.folding import Fold

PART = 32
"""Messages a stored part of a history holds at least (four bench turns), in both engines."""
Key = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id)"""
History = dict[str, DeltaChannelHistory]
"""What `get_delta_channel_history` returns for the `messages` channel."""


def named_key(config: RunnableConfig) -> Key | None:
    """The checkpoint `config` names; None if it names none (then: the thread's newest)."""
    if not (checkpoint_id := get_checkpoint_id(config)):
        return None
    configurable = config["configurable"]
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns", ""), checkpoint_id


def latest_key(latest: CheckpointTuple | None) -> Key | None:
    """The key of a thread's newest checkpoint, as `get_tuple` found it; None if it has none."""
    return None if latest is None else named_key(latest.config)


def no_messages() -> History:
    """The history of a thread without checkpoints."""
    return {"messages": {"writes": []}}


def seeded(messages: list[Any]) -> History:
    """A folded history handed to LangGraph as a copy: the channel hands its value out."""
    return {"messages": {"writes": [], "seed": list(messages)}}


def are_messages(seed: Any, writes: list[Any]) -> bool:
    """Whether a `messages` history holds messages only: then it is Ferry's message channel.

    The agent's reducer is applied only then: messages, or what a caller sends as one (text, a
    `(role, text)` pair, a message dict). A graph that keeps anything else under that name gets
    LangGraph's generic rebuild, with its own reducer.
    """
    base = seed.value if isinstance(seed, DeltaSnapshot) else (seed or [])
    if not isinstance(base, list) or not all(isinstance(m, BaseMessage) for m in base):
        return False
    items = (item for write in writes for item in (write if isinstance(write, list) else [write]))
    return all(_message_like(item) for item in items)


def _message_like(item: Any) -> bool:
    if isinstance(item, BaseMessage | str):
        return True
    if isinstance(item, dict):
        return "content" in item and ("role" in item or "type" in item)
    return isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)


def folded(
    seed: Any, writes: list[Any], fold: Fold | None, *, checked: bool = False
) -> list[Any] | None:
    """The messages `writes` fold into after `seed`; None if that is LangGraph's to do.

    `checked`: the seed is a list this process folded (and checked) before, so only the writes
    are checked (a walk over the whole history at every step would grow with it), and it is
    folded as it is (the reducer never changes the list it is given).
    """
    if fold is None or any(isinstance(value, Overwrite) for value in writes):
        return None  # no reducer given, or an edit in Studio
    if not are_messages([] if checked else seed, writes):
        return None
    return fold(seed if checked else snapshot_value(seed), writes)


# -- the histories a saver caches --------------------------------------------------------------

CACHED = 128
"""Histories, and steps' writes, cached at most."""


def bounded(entries: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Put `key` last in an LRU, dropping the least recently used beyond `CACHED`."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > CACHED:
        entries.popitem(last=False)


class CachedHistories:
    """Recently built histories by checkpoint, most recently used last (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._histories: OrderedDict[Key, list[Any]] = OrderedDict()

    def get(self, key: Key) -> list[Any] | None:
        """The history at a checkpoint, if cached (the list cached: not to be changed)."""
        value = self._histories.get(key)  # a plain read is safe without the lock
        if value is not None:
            with self._lock:
                if key in self._histories:
                    self._histories.move_to_end(key)
        return value

    def cache(self, key: Key, messages: list[Any]) -> None:
        """Cache the history at a checkpoint."""
        with self._lock:
            bounded(self._histories, key, messages)

    def of_thread(self, thread: tuple[str, str]) -> dict[str, list[Any]]:
        """Every history cached for a thread's namespace, by checkpoint id."""
        with self._lock:
            return {k[2]: v for k, v in self._histories.items() if k[:2] == thread}

    def forget(
        self, thread_id: str, namespace: str | None = None, kept: Sequence[str] = ()
    ) -> None:
        """Let go of a thread's histories (of one namespace), but those at `kept` checkpoints."""
        with self._lock:
            for key in [k for k in self._histories if k[0] == thread_id]:
                if (namespace is None or key[1] == namespace) and key[2] not in kept:
                    del self._histories[key]


class StepsPutHere:
    """The checkpoints this process put, and the `messages` writes given at them since."""

    def __init__(self, histories: CachedHistories) -> None:
        self._histories = histories
        self._lock = threading.Lock()
        self._put_here: OrderedDict[Key, None] = OrderedDict()
        self._writes: OrderedDict[Key, list[tuple[str, str, int, Any]]] = OrderedDict()

    def put_here(self, key: Key) -> None:
        """A checkpoint this process put: every write at it will come through this saver."""
        with self._lock:
            bounded(self._put_here, key, None)

    def writes_put(self, step: Key, task_id: str, task_path: str, writes: Sequence[Any]) -> None:
        """Note a task's `messages` writes at a checkpoint (they may come before its put)."""
        found = [
            (task_path, task_id, idx, value)
            for idx, (channel, value) in enumerate(writes)
            if channel == "messages"
        ]
        with self._lock:
            bounded(self._writes, step, [*self._writes.get(step, []), *found])

    def writes_unknown(self, step: Key) -> None:
        """Some writes at a checkpoint were stored before: its child's history is read back."""
        with self._lock:
            self._writes.pop(step, None)
            self._put_here.pop(step, None)

    def fold(self, parent: Key, key: Key, fold: Fold | None) -> list[Any] | None:
        """Cache and return a new checkpoint's history, if it can be built from memory."""
        known = self._histories.get(parent)
        with self._lock:
            writes = self._writes.pop(parent, [])
            # Once: a second child of the parent (a fork, a time travel) reads its writes back.
            ours = self._put_here.pop(parent, False) is None
        if known is None or not ours:
            return None
        writes.sort(key=lambda w: writes_sort_key(*w[:3]))
        messages = folded(known, [value for *_, value in writes], fold, checked=True)
        if messages is not None:  # else not Ferry's messages: LangGraph's rebuild, from the file
            self._histories.cache(key, messages)
        return messages
