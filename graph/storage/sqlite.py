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
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Overwrite

from graph.state import fold_messages
from graph.storage import history
from graph.storage.allowlist import NamesThreadOnRefusal, naming_thread
from graph.storage.in_threads import AsyncInThreads
from graph.storage.internals import DeltaChannelHistory, snapshot_value, writes_have_task_path
from graph.storage.serde import FerrySerializer, serializer
from graph.storage.started import STARTED_CALLS_TABLE
from graph.storage.versions import CompactVersions, upgrade

log = logging.getLogger("ferry.saver")
_CACHED_HISTORIES = 128
_SAVE_FROM = 200  # messages; a shorter history replays in a few milliseconds
_SAVE_GROWTH = 1.5  # save again once the history has grown by half: a read replays at most a third
# LangGraph's own tables, created first WITHOUT ROWID (LangGraph then finds them; the columns are
# its own): each row lives in its primary-key index instead of beside a second copy of its key
# (~150 bytes a row, two dozen rows a turn). With 8 KB pages the 1-2 KB message rows still pack
# well; measured by `make bench` (bench/README.md).
CHECKPOINTS_TABLE = """
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint BLOB,
    metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
) WITHOUT ROWID"""
WRITES_TABLE = """
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
) WITHOUT ROWID"""
# One history per thread (and namespace), at the checkpoint named; replaced only by a longer one.
SAVED_HISTORIES_TABLE = """
CREATE TABLE IF NOT EXISTS ferry_histories (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    messages INTEGER NOT NULL,
    type TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns)
) WITHOUT ROWID"""

RECORD_START = "INSERT OR IGNORE INTO ferry_started_calls VALUES (?, ?)"
FORGET_START = "DELETE FROM ferry_started_calls WHERE thread_id = ? AND tool_call_id = ?"
"""Record a tool call as started (nothing if it already was)."""

OPENING_STATEMENTS = (
    # Pages that fit the typical 1-2 KB message rows (only a new file can choose its page size;
    # an existing one keeps it).
    "PRAGMA page_size=8192",
    # WAL lets readers and one writer work at once; the busy timeout waits out other writers
    # instead of failing with "database is locked".
    "PRAGMA journal_mode=WAL",
    "PRAGMA busy_timeout=30000",
    "PRAGMA synchronous=NORMAL",
    # Read pages in place rather than copying each one: a first read of a long thread touches
    # all of its pages (about 15% less time in SQLite; the address space is not memory used).
    "PRAGMA mmap_size=268435456",
    CHECKPOINTS_TABLE,
    WRITES_TABLE,
)
"""Run on every connection to a Ferry SQLite file, by the CLI, Python and the server alike."""


def connect(path: Path) -> sqlite3.Connection:
    """Open the checkpoint database, creating its folder, tuned for several writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    for statement in OPENING_STATEMENTS:
        conn.execute(statement)
    return conn


FERRY_TABLES = (STARTED_CALLS_TABLE, SAVED_HISTORIES_TABLE)
"""Ferry's own tables beside LangGraph's, created by every SQLite saver's setup."""
DELETE_FERRY_ROWS = (
    "DELETE FROM ferry_started_calls WHERE thread_id = ?",
    "DELETE FROM ferry_histories WHERE thread_id = ?",
)
"""Ferry's own rows of a thread, deleted with its checkpoints by every SQLite saver."""


class FerrySaver(NamesThreadOnRefusal, AsyncInThreads, CompactVersions, SqliteSaver):
    """A SQLite saver that keeps rebuilt message histories, in memory and sparsely on disk.

    A checkpoint never changes once written, so the history rebuilt at a checkpoint stays true.
    In memory, the recently rebuilt ones: a running process replays only a turn's new writes.
    On disk, one per thread, saved again each time the thread's history has grown by half: a
    new process (`ferry history`, a restarted server) replays at most the newest third of a
    thread, the saved copy costs at most one compressed history per thread, and the saves take
    time linear in the thread's length in total (each is half again the size of the last).
    """

    def __init__(self, conn: sqlite3.Connection, serde: FerrySerializer | None = None) -> None:
        super().__init__(conn, serde=serde or serializer())
        self._histories: OrderedDict[tuple[str, str, str], list[Any]] = OrderedDict()
        self._histories_lock = threading.Lock()

    def setup(self) -> None:
        """Create LangGraph's tables, Ferry's record of started calls and its saved histories."""
        super().setup()
        for statement in FERRY_TABLES:
            self.conn.execute(statement)
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
        with self.cursor(transaction=False) as cur:
            replayed, saved_length = history.replay(
                cur, self.serde, key, self._remembered, writes_have_task_path(self)
            )
        writes = [value for _, _, value in replayed["writes"]]
        seed = replayed.get("seed")
        if any(isinstance(value, Overwrite) for value in writes) or not history.are_messages(
            seed, writes
        ):
            return {"messages": replayed}  # an edit in Studio, or not Ferry's messages: LangGraph
        messages = fold_messages(snapshot_value(seed), writes)
        self._remember(key, messages)
        if len(messages) >= max(_SAVE_FROM, _SAVE_GROWTH * saved_length):
            self._save_history(key, messages)
        return {"messages": {"writes": [], "seed": list(messages)}}

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
        except sqlite3.OperationalError as error:  # e.g. a read-only file: only speed is lost
            log.debug("history of %s not saved: %s", key[0], error)

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
