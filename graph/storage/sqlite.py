"""Ferry's SQLite saver: one file (WAL, busy timeout) shared by the CLI, Python and Studio.

Messages are stored as the writes of each step (see `graph.state`), so a thread's file grows
with its conversation, not with its square. Rebuilding the history means replaying those
writes; `FerrySaver` remembers rebuilt histories so the next turn replays only what is new.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    get_checkpoint_id,
)
from langgraph.types import Overwrite

from graph.state import fold_messages
from graph.storage import history, saved_parts
from graph.storage.allowlist import NamesThreadOnRefusal, naming_thread
from graph.storage.checkpoint_rows import CompactCheckpoints
from graph.storage.in_threads import AsyncInThreads
from graph.storage.internals import DeltaChannelHistory, snapshot_value, writes_have_task_path
from graph.storage.serde import FerrySerializer, collection_paused, serializer
from graph.storage.sqlite_schema import (
    DELETE_FERRY_ROWS,
    FERRY_TABLES,
    FORGET_START,
    OPENING_STATEMENTS,
    RECORD_START,
)
from graph.storage.sqlite_summaries import SummarisesThreads
from graph.storage.versions import CompactVersions, upgrade

log = logging.getLogger("ferry.saver")
_CACHED_HISTORIES = 128
_SAVE_FROM = 200  # messages; a shorter history replays in a few milliseconds
_SAVE_GROWTH = 1.5  # a new base once the history is half again what is saved (parts aside)


def connect(path: Path) -> sqlite3.Connection:
    """Open the checkpoint database, creating its folder, tuned for several writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    for statement in OPENING_STATEMENTS:
        conn.execute(statement)
    return conn


class FerrySaver(
    SummarisesThreads, NamesThreadOnRefusal, AsyncInThreads, CompactVersions, CompactCheckpoints
):
    """A SQLite saver that keeps rebuilt message histories, in memory and sparsely on disk.

    A checkpoint never changes once written, so the history rebuilt at a checkpoint stays true.
    In memory, the recently rebuilt ones: a running process replays only a turn's new writes.
    On disk, one per thread from 200 messages on, extended by parts of a few turns each
    (`graph.storage.saved_parts`): a new process (`ferry history`, a restarted server) replays
    fewer than `saved_parts.PART` messages' writes, and the copy costs one compressed history.
    """

    def __init__(self, conn: sqlite3.Connection, serde: FerrySerializer | None = None) -> None:
        super().__init__(conn, serde=serde or serializer())
        self._histories: OrderedDict[tuple[str, str, str], list[Any]] = OrderedDict()
        self._histories_lock = threading.Lock()
        # Per (thread, namespace): the newest saved point this process knows the history at.
        self._saved: OrderedDict[tuple[str, str], tuple[str, list[Any]]] = OrderedDict()

    def setup(self) -> None:
        """Create LangGraph's tables and Ferry's, once (every cursor asks for it)."""
        if self.is_setup:
            return
        super().setup()
        try:
            for statement in FERRY_TABLES:
                self.conn.execute(statement)
        except sqlite3.OperationalError:  # read-only, from before a table: read without it
            log.debug("read-only file: Ferry's newer tables not created")
        self.conn.commit()
        upgrade(self.conn, self.serde)

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        with self.cursor() as cur:
            cur.execute(RECORD_START, (thread_id, tool_call_id))
            return bool(cur.rowcount == 1)

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        with self.cursor() as cur:
            cur.execute(FORGET_START, (thread_id, tool_call_id))

    def thread_ids(self) -> list[str]:
        """Ids of the stored threads."""
        with self.cursor(transaction=False) as cur:
            cur.execute("SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = ''")
            return [row[0] for row in cur.fetchall()]

    def _remembered(self, key: tuple[str, str, str]) -> list[Any] | None:
        value = self._histories.get(key)  # a plain read is safe without the lock
        if value is not None:
            with self._histories_lock:
                if key in self._histories:
                    self._histories.move_to_end(key)
        return value

    def _remember(self, key: tuple[str, str, str], value: list[Any]) -> None:
        with self._histories_lock:
            self._histories[key] = value
            self._histories.move_to_end(key)
            while len(self._histories) > _CACHED_HISTORIES:
                self._histories.popitem(last=False)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild `messages` from the nearest remembered (or snapshot) checkpoint onwards."""
        if list(channels) != ["messages"]:
            return super().get_delta_channel_history(config=config, channels=channels)
        with naming_thread(config):
            return self._messages_history(config)

    def _messages_history(self, config: RunnableConfig) -> Mapping[str, DeltaChannelHistory]:
        thread_id = str(config["configurable"]["thread_id"])
        namespace = config["configurable"].get("checkpoint_ns", "")
        target = get_checkpoint_id(config)
        if not target:
            latest = self.get_tuple(config)
            if latest is None:
                return {"messages": {"writes": []}}
            target = latest.config["configurable"]["checkpoint_id"]
        key = (thread_id, namespace, target)
        if (known := self._remembered(key)) is not None:
            # A copy: the channel hands its value out (`get_state`), and a caller may edit it.
            return {"messages": {"writes": [], "seed": list(known)}}
        found: list[list[Any]] = []  # the remembered history the walk started from, if any

        def remembered(ancestor: history.Key) -> list[Any] | None:
            if (known := self._remembered(ancestor)) is not None:
                found.append(known)
            return known

        with self.cursor(transaction=False) as cur, collection_paused():
            replayed, saved_length = history.replay(
                cur, self.serde, key, remembered, writes_have_task_path(self),
                on_saved=lambda at, saved: self._know_saved(key[:2], at, list(saved)),
            )  # fmt: skip
        writes = [value for _, _, value in replayed["writes"]]
        seed = replayed.get("seed")
        # A remembered history was checked when it was remembered: only the new writes need it
        # (a walk over the whole history at every step would grow with the thread).
        checked = [] if found and found[-1] is seed else seed
        if any(isinstance(value, Overwrite) for value in writes) or not history.are_messages(
            checked, writes
        ):
            return {"messages": replayed}  # an edit in Studio, or not Ferry's messages: LangGraph
        messages = fold_messages(snapshot_value(seed), writes)
        self._remember(key, messages)
        self._keep_saved(key, messages, saved_length)
        return {"messages": {"writes": [], "seed": list(messages)}}

    def _know_saved(self, thread: tuple[str, str], at: str, saved: list[Any] | None) -> None:
        with self._histories_lock:
            if saved is None:
                self._saved.pop(thread, None)
                return
            self._saved[thread] = (at, saved)
            self._saved.move_to_end(thread)
            while len(self._saved) > _CACHED_HISTORIES:
                self._saved.popitem(last=False)

    def _keep_saved(self, key: history.Key, messages: list[Any], length: int) -> None:
        """Append the history's new messages to the saved one, or save it anew (a base)."""
        known = self._saved.get(key[:2])
        if (
            known is not None
            and len(known[1]) == length
            and len(messages) >= length + saved_parts.PART
        ):
            if not saved_parts.extends(messages, known[1]):
                self._know_saved(key[:2], "", None)  # another branch: stop comparing each step
            elif self._append(key, messages, (known[0], length)):
                return
        if len(messages) >= max(_SAVE_FROM, _SAVE_GROWTH * length):
            self._save_history(key, messages)

    def _append(self, key: history.Key, messages: list[Any], saved: tuple[str, int]) -> bool:
        try:
            with self.cursor() as cur:
                appended = saved_parts.append(cur, self.serde, key, messages, saved)
        except sqlite3.OperationalError:  # e.g. a read-only file: only speed is lost
            return False
        self._know_saved(key[:2], key[2], messages if appended else None)
        return appended

    def _save_history(self, key: tuple[str, str, str], messages: list[Any]) -> None:
        """Save the history at a checkpoint as its thread's, unless a longer one is saved."""
        thread_id, namespace, checkpoint_id = key
        type_tag, value = self.serde.dumps_typed(messages)
        try:
            with self.cursor() as cur:
                # Delete first, in the same transaction: the new copy then reuses the old one's
                # pages instead of growing the file by its whole size.
                cur.execute(
                    "DELETE FROM ferry_histories "
                    "WHERE thread_id = ? AND checkpoint_ns = ? AND messages < ?",
                    (thread_id, namespace, len(messages)),
                )
                cur.execute(
                    "INSERT OR IGNORE INTO ferry_histories VALUES (?, ?, ?, ?, ?, ?)",
                    (thread_id, namespace, checkpoint_id, len(messages), type_tag, value),
                )
                if saved := cur.rowcount == 1:  # the parts extended the base it replaced
                    cur.execute(saved_parts.DELETE_PARTS, (thread_id, namespace))
        except sqlite3.OperationalError as error:  # e.g. a read-only file: only speed is lost
            log.debug("history of %s not saved: %s", key[0], error)
            return
        self._know_saved(key[:2], checkpoint_id, messages if saved else None)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each thread's latest checkpoint per namespace, or (`delete`) nothing.

        `keep_latest` keeps everything that checkpoint needs: its history is stored into it
        first (`graph.storage.retention`). This is what `langgraph.json`'s `checkpointer.ttl`
        and `ferry prune` run.
        """
        from graph.storage.retention import prune_threads

        prune_threads(self, thread_ids, strategy=strategy)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes, and forget its remembered histories."""
        super().delete_thread(thread_id)
        with self.cursor() as cur:
            for statement in DELETE_FERRY_ROWS:
                cur.execute(statement, (str(thread_id),))
        with self._histories_lock:
            for key in [k for k in self._histories if k[0] == str(thread_id)]:
                del self._histories[key]
            for thread in [k for k in self._saved if k[0] == str(thread_id)]:
                del self._saved[thread]
