"""The message histories a saver holds in memory, and the steps' writes it folds into them.

A checkpoint never changes once written, so the history at a checkpoint stays true: a saver
keeps the ones it rebuilt or built (the most recent `HELD`), in SQLite and Postgres alike. A
new checkpoint's history is its parent's with the `messages` writes put at the parent; when
this process put the parent, every write at it came through this saver, so the new history is
folded from what the writes were given, and nothing is read back (`StepsPutHere`, SQLite's).
A parent another process put (a run resumed after a crash, with some of its tasks' writes
stored before) is read from the database.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import writes_sort_key

from graph.storage.history.messages import Key, folded

if TYPE_CHECKING:
    from graph.storage.history.folding import Fold

HELD = 128
"""Histories, and steps' writes, held at most."""
MESSAGES = "messages"


def bounded(entries: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Put `key` last in an LRU, dropping the least recently used beyond `HELD`."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > HELD:
        entries.popitem(last=False)


class Histories:
    """Recently built histories by checkpoint, most recently used last (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._histories: OrderedDict[Key, list[Any]] = OrderedDict()

    def get(self, key: Key) -> list[Any] | None:
        """The history at a checkpoint, if held (the list held: not to be changed)."""
        value = self._histories.get(key)  # a plain read is safe without the lock
        if value is not None:
            with self._lock:
                if key in self._histories:
                    self._histories.move_to_end(key)
        return value

    def keep(self, key: Key, messages: list[Any]) -> None:
        """Hold the history at a checkpoint."""
        with self._lock:
            bounded(self._histories, key, messages)

    def of_thread(self, thread: tuple[str, str]) -> dict[str, list[Any]]:
        """Every history held for a thread's namespace, by checkpoint id."""
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

    def __init__(self, histories: Histories) -> None:
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
            if channel == MESSAGES
        ]
        with self._lock:
            bounded(self._writes, step, [*self._writes.get(step, []), *found])

    def writes_unknown(self, step: Key) -> None:
        """Some writes at a checkpoint were stored before: its child's history is read back."""
        with self._lock:
            self._writes.pop(step, None)
            self._put_here.pop(step, None)

    def fold(self, parent: Key, key: Key, fold: Fold | None) -> list[Any] | None:
        """Hold and return a new checkpoint's history, if it can be built from memory."""
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
            self._histories.keep(key, messages)
        return messages
