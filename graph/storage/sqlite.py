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
from langgraph.checkpoint.base import DeltaChannelHistory, get_checkpoint_id
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite._delta import build_delta_channels_writes_history
from langgraph.types import Overwrite

from graph.state import fold_messages
from graph.storage.allowlist import NamesThreadOnRefusal, naming_thread
from graph.storage.serde import FerrySerializer, serializer

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
# A checkpoint's ancestors, nearest first, by parent links (ids are not ordered across
# processes), each with whether it may hold a snapshot of the messages: LangGraph drops its
# count of updates since the last snapshot when it takes one, and the root of a pruned thread
# holds one. CROSS JOIN keeps each step a primary-key lookup.
_SNAPSHOT_POSSIBLE = (
    "({t}.parent_checkpoint_id IS NULL OR json_extract(CAST({t}.metadata AS TEXT), "
    "'$.counters_since_delta_snapshot.messages') IS NULL)"
)
_CHAIN_SQL = (
    "WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, may_hold_snapshot) AS ("
    "SELECT checkpoint_id, parent_checkpoint_id, "
    + _SNAPSHOT_POSSIBLE.format(t="checkpoints")
    + " FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
    "UNION ALL SELECT c.checkpoint_id, c.parent_checkpoint_id, "
    + _SNAPSHOT_POSSIBLE.format(t="c")
    + " FROM chain a CROSS JOIN checkpoints c ON c.checkpoint_id = a.parent_checkpoint_id "
    "WHERE c.thread_id = ? AND c.checkpoint_ns = ?) "
    "SELECT checkpoint_id, may_hold_snapshot FROM chain"
)


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
_SAVED_AT_SQL = (
    "SELECT checkpoint_id, messages FROM ferry_histories WHERE thread_id = ? AND checkpoint_ns = ?"
)


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


class CompactVersions:
    """Count channel versions with small integers.

    LangGraph's SQLite savers default to a zero-padded counter plus a random fraction, about 50
    bytes per channel in every checkpoint: more than the messages themselves in a typical step.
    Threads that already carry string versions keep them, so one channel never mixes the two.
    """

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The version after `current`."""
        if isinstance(current, str):
            return super().get_next_version(current, channel)  # type: ignore[misc]  # the saver it is mixed into has one
        return (current or 0) + 1


class FerrySaver(NamesThreadOnRefusal, CompactVersions, SqliteSaver):
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
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS ferry_started_calls ("
            "thread_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, "
            "PRIMARY KEY (thread_id, tool_call_id))"
        )
        self.conn.execute(SAVED_HISTORIES_TABLE)

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        with self.cursor() as cur:
            cur.execute(
                "INSERT OR IGNORE INTO ferry_started_calls VALUES (?, ?)", (thread_id, tool_call_id)
            )
            return bool(cur.rowcount == 1)

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
            return {"messages": {"writes": [], "seed": known}}
        history, saved_length = self._replay_since_remembered(thread_id, namespace, target)
        writes = [value for _, _, value in history["writes"]]
        if any(isinstance(value, Overwrite) for value in writes):
            return {"messages": history}  # rare (an edit in Studio): let LangGraph apply it
        seed = history.get("seed")
        base = seed.value if isinstance(seed, _DeltaSnapshot) else (seed or [])
        messages = fold_messages(list(base), writes)
        self._remember(key, messages)
        if len(messages) >= max(_SAVE_FROM, _SAVE_GROWTH * saved_length):
            self._save_history(key, messages)
        return {"messages": {"writes": [], "seed": messages}}

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

    def _replay_since_remembered(
        self, thread_id: str, namespace: str, target: str
    ) -> tuple[DeltaChannelHistory, int]:
        """The writes since the nearest remembered, saved or snapshot ancestor, and its history.

        Also returns the length of the thread's saved history (0 if none). The walk reads ids
        and one metadata field, and opens a checkpoint only where LangGraph may have stored a
        snapshot (the counter it keeps since the last one is absent). A snapshot must be
        honoured: when new input replaces an unfinished step, LangGraph takes one so the
        abandoned step's stored writes are not replayed.
        """
        chain: list[str] = []
        walked: set[str] = set()
        seed: Any = None
        with self.cursor(transaction=False) as cur:
            blobs = cur.connection.cursor()
            blobs.execute(_SAVED_AT_SQL, (thread_id, namespace))
            saved_at, saved_length = blobs.fetchone() or (None, 0)
            cur.execute(_CHAIN_SQL, (thread_id, namespace, target, thread_id, namespace))
            for checkpoint_id, may_hold_snapshot in cur:
                if checkpoint_id == target and not walked:
                    walked.add(checkpoint_id)  # its own writes belong to the next step
                    continue
                if checkpoint_id in walked:
                    break  # a re-put checkpoint made the chain loop
                walked.add(checkpoint_id)
                chain.append(checkpoint_id)
                key = (thread_id, namespace, checkpoint_id)
                seed = self._remembered(key)
                if seed is None and checkpoint_id == saved_at:
                    seed = _saved_messages(blobs, self.serde, key)
                if seed is None and may_hold_snapshot:
                    seed = _stored_messages(blobs, self.serde, key)
                if seed is not None:
                    break
            rows = self._message_writes(blobs, thread_id, namespace, chain) if chain else []
        seeded = set() if seed is None else {"messages"}
        history = build_delta_channels_writes_history(
            channels=["messages"], chain_by_ch={"messages": chain},
            seed_val_by_ch={"messages": seed}, seeded=seeded, stage2_rows=rows, serde=self.serde,
        )["messages"]  # fmt: skip
        return history, saved_length

    def _message_writes(
        self, cur: sqlite3.Cursor, thread_id: str, namespace: str, chain: list[str]
    ) -> list[Any]:
        """The `messages` writes stored at the checkpoints in `chain` (LangGraph's stage-2 rows).

        One range of the primary key holds them all: the rows between the chain's smallest and
        largest ids (a branch forked off the chain may have rows in between; they are left out).
        """
        task_path = "task_path" if self._has_task_path else "''"
        cur.execute(
            f"SELECT checkpoint_id, channel, task_id, idx, type, value, {task_path} FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id BETWEEN ? AND ? "
            "AND channel = 'messages'",
            (thread_id, namespace, min(chain), max(chain)),
        )
        wanted = set(chain)
        return [row for row in cur if row[0] in wanted]

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes, and forget its remembered histories."""
        super().delete_thread(thread_id)
        with self.cursor() as cur:
            for table in ("ferry_started_calls", "ferry_histories"):
                cur.execute(f"DELETE FROM {table} WHERE thread_id = ?", (str(thread_id),))
        with self._histories_lock:
            for key in [k for k in self._histories if k[0] == str(thread_id)]:
                del self._histories[key]


def _saved_messages(cur: sqlite3.Cursor, serde: Any, key: tuple[str, str, str]) -> Any:
    """The history saved at a checkpoint, or None if it is no longer the one saved."""
    return _decoded(cur, serde, "SELECT type, value FROM ferry_histories", key)


def _stored_messages(cur: sqlite3.Cursor, serde: Any, key: tuple[str, str, str]) -> Any:
    """The messages a checkpoint stores itself (a snapshot), or None."""
    checkpoint = _decoded(cur, serde, "SELECT type, checkpoint FROM checkpoints", key) or {}
    return checkpoint.get("channel_values", {}).get("messages")


def _decoded(cur: sqlite3.Cursor, serde: Any, select: str, key: tuple[str, str, str]) -> Any:
    """The (type, value) a query selects for one checkpoint of a thread, decoded; or None."""
    cur.execute(f"{select} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", key)
    row = cur.fetchone()
    return serde.loads_typed((row[0], row[1])) if row else None
