"""The message histories a saver holds in memory, and the steps' writes it folds into them.

A checkpoint never changes once written, so the history at a checkpoint stays true: the saver
keeps the ones it rebuilt or built (`FerrySaver`, the most recent 128). A new checkpoint's
history is its parent's with the `messages` writes put at the parent; when this process put
the parent, every write at it came through this saver, so the new history is folded from
what the writes were given, and nothing is read back. A parent another process put (a run
resumed after a crash, with some of its tasks' writes stored before) is read from the file.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import writes_sort_key
from langgraph.types import Overwrite

from graph.state import fold_messages
from graph.storage.history.replay import Key, are_messages
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, key_of

HELD = 128
"""Histories, and steps' writes, held at most."""


def _bounded(entries: OrderedDict[Any, Any], key: Any) -> None:
    entries.move_to_end(key)
    while len(entries) > HELD:
        entries.popitem(last=False)


class HeldHistories:
    """Recently built histories by checkpoint, and the writes at recent checkpoints put here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._histories: OrderedDict[Key, list[Any]] = OrderedDict()
        self._put_here: OrderedDict[Key, None] = OrderedDict()
        self._writes: OrderedDict[Key, list[tuple[str, str, int, Any]]] = OrderedDict()

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
            self._histories[key] = messages
            _bounded(self._histories, key)

    def by_stored_key(self, thread: tuple[str, str]) -> dict[Any, Key]:
        """The checkpoints of a thread's namespace held here, by their key as stored."""
        with self._lock:
            return {key_of(k[2]): k for k in self._histories if k[:2] == thread}

    def forget(
        self, thread_id: str, namespace: str | None = None, kept: Sequence[str] = ()
    ) -> None:
        """Let go of a thread's histories (of one namespace), but those at `kept` checkpoints."""
        with self._lock:
            for key in [k for k in self._histories if k[0] == thread_id]:
                if (namespace is None or key[1] == namespace) and key[2] not in kept:
                    del self._histories[key]

    def put_here(self, key: Key) -> None:
        """A checkpoint this process put: every write at it will come through this saver."""
        with self._lock:
            self._put_here[key] = None
            _bounded(self._put_here, key)

    def writes_put(self, step: Key, task_id: str, task_path: str, writes: Sequence[Any]) -> None:
        """Note a task's `messages` writes at a checkpoint (they may come before its put)."""
        found = [
            (task_path, task_id, idx, value)
            for idx, (channel, value) in enumerate(writes)
            if channel == UNBOUNDED_CHANNEL
        ]
        with self._lock:
            self._writes.setdefault(step, []).extend(found)
            _bounded(self._writes, step)

    def writes_unknown(self, step: Key) -> None:
        """Some writes at a checkpoint were stored before: its child's history is read back."""
        with self._lock:
            self._writes.pop(step, None)
            self._put_here.pop(step, None)

    def fold(self, parent: Key, key: Key) -> list[Any] | None:
        """Hold and return a new checkpoint's history, if it can be built from memory."""
        known = self.get(parent)
        with self._lock:
            writes = self._writes.pop(parent, [])
            # Once: a second child of the parent (a fork, a time travel) reads its writes back.
            ours = self._put_here.pop(parent, False) is None
        if known is None or not ours:
            return None
        writes.sort(key=lambda w: writes_sort_key(*w[:3]))
        values = [value for *_, value in writes]
        if any(isinstance(v, Overwrite) for v in values) or not are_messages([], values):
            return None  # not Ferry's messages: LangGraph's generic rebuild, from the file
        messages = fold_messages(known, values)
        self.keep(key, messages)
        return messages
