"""Ferry's SQLite saver: one file (WAL, busy timeout) shared by the CLI, Python and Studio.

Messages are stored as the writes of each step (see `graph.state`), so a thread's file grows
with its conversation, not with its square. Rebuilding the history means replaying those
writes; `FerrySaver` remembers rebuilt histories so the next turn replays only what is new.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, get_checkpoint_id
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite._delta import (
    build_delta_channels_writes_history,
    build_delta_stage2_sql,
)
from langgraph.types import Overwrite

from graph.serde import FerrySerializer
from graph.state import fold_messages

_CACHED_HISTORIES = 128
_LOOKUPS = 64  # checkpoints walked and fetched one by one; a longer chain scans the thread
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
    "SELECT checkpoint_id, parent_checkpoint_id, may_hold_snapshot FROM chain"
)
# Every link of a thread at once, for a walk too long to take one lookup at a time.
_LINKS_SQL = (
    "SELECT checkpoint_id, parent_checkpoint_id, "
    + _SNAPSHOT_POSSIBLE.format(t="checkpoints")
    + " FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
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


class FerrySaver(CompactVersions, SqliteSaver):
    """A SQLite saver that keeps recently rebuilt message histories in memory.

    A checkpoint never changes once written, so the history rebuilt at a checkpoint stays true;
    the next load walks back only to the nearest remembered checkpoint and replays the writes
    after it, instead of every write since the thread began.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn, serde=FerrySerializer())
        self._histories: OrderedDict[tuple[str, str, str], list[Any]] = OrderedDict()
        self._histories_lock = threading.Lock()

    def setup(self) -> None:
        """Create LangGraph's tables and Ferry's record of started side-effect calls."""
        super().setup()
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS ferry_started_calls ("
            "thread_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, "
            "PRIMARY KEY (thread_id, tool_call_id))"
        )

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
        history = self._replay_since_remembered(thread_id, namespace, target)
        writes = [value for _, _, value in history["writes"]]
        if any(isinstance(value, Overwrite) for value in writes):
            return {"messages": history}  # rare (an edit in Studio): let LangGraph apply it
        seed = history.get("seed")
        base = seed.value if isinstance(seed, _DeltaSnapshot) else (seed or [])
        messages = fold_messages(list(base), writes)
        self._remember(key, messages)
        return {"messages": {"writes": [], "seed": messages}}

    def _replay_since_remembered(
        self, thread_id: str, namespace: str, target: str
    ) -> DeltaChannelHistory:
        """The writes since the nearest remembered or snapshot ancestor, and its history.

        The walk reads ids and one metadata field, and opens a checkpoint only where LangGraph
        may have stored a snapshot (the counter it keeps since the last one is absent). A
        snapshot must be honoured: when new input replaces an unfinished step, LangGraph takes
        one so the abandoned step's stored writes are not replayed.
        """
        chain: list[str] = []
        walked: set[str] = set()
        seed: Any = None
        with self.cursor(transaction=False) as cur:
            blobs = cur.connection.cursor()
            for checkpoint_id, may_hold_snapshot in _ancestors(cur, thread_id, namespace, target):
                if checkpoint_id == target and not walked:
                    walked.add(checkpoint_id)  # its own writes belong to the next step
                    continue
                if checkpoint_id in walked:
                    break  # a re-put checkpoint made the chain loop
                walked.add(checkpoint_id)
                chain.append(checkpoint_id)
                seed = self._remembered((thread_id, namespace, checkpoint_id))
                if seed is None and may_hold_snapshot:
                    seed = _stored_messages(blobs, self.serde, thread_id, namespace, checkpoint_id)
                if seed is not None:
                    break
            rows = self._message_writes(blobs, thread_id, namespace, chain) if chain else []
        seeded = set() if seed is None else {"messages"}
        return build_delta_channels_writes_history(
            channels=["messages"], chain_by_ch={"messages": chain},
            seed_val_by_ch={"messages": seed}, seeded=seeded, stage2_rows=rows, serde=self.serde,
        )["messages"]  # fmt: skip

    def _message_writes(
        self, cur: sqlite3.Cursor, thread_id: str, namespace: str, chain: list[str]
    ) -> list[Any]:
        """The `messages` writes stored at the checkpoints in `chain` (LangGraph's stage-2 rows)."""
        if len(chain) <= _LOOKUPS:
            sql = build_delta_stage2_sql(has_task_path=self._has_task_path, chain_lens=[len(chain)])
            cur.execute(sql, [thread_id, namespace, "messages", *chain])
            return cur.fetchall()
        # A long chain is most of the thread (a first read): one scan of the thread's rows in
        # key order is a third of the cost of a lookup per checkpoint.
        task_path = "task_path" if self._has_task_path else "''"
        cur.execute(
            f"SELECT checkpoint_id, channel, task_id, idx, type, value, {task_path} FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND channel = 'messages'",
            (thread_id, namespace),
        )
        wanted = set(chain)
        return [row for row in cur if row[0] in wanted]

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes, and forget its remembered histories."""
        super().delete_thread(thread_id)
        with self.cursor() as cur:
            cur.execute("DELETE FROM ferry_started_calls WHERE thread_id = ?", (str(thread_id),))
        with self._histories_lock:
            for key in [k for k in self._histories if k[0] == str(thread_id)]:
                del self._histories[key]


def _ancestors(
    cur: sqlite3.Cursor, thread_id: str, namespace: str, target: str
) -> Iterator[tuple[str, bool]]:
    """`target` and its ancestors, nearest first, each with whether it may hold a snapshot.

    The first steps follow parent links a lookup at a time: a running thread finds a remembered
    history within a few. A longer walk (a first read of a long thread) loads all the thread's
    links in one scan, which costs about half as much as a lookup per checkpoint.
    """
    keys = (thread_id, namespace)
    cur.execute(_CHAIN_SQL, (*keys, target, *keys))
    parent = None
    for steps, row in enumerate(cur):
        checkpoint_id, parent, may_hold_snapshot = row
        yield checkpoint_id, bool(may_hold_snapshot)
        if steps == _LOOKUPS:
            break
    else:
        return
    links = {row[0]: row for row in cur.execute(_LINKS_SQL, keys)}
    while parent in links:
        checkpoint_id, parent, may_hold_snapshot = links.pop(parent)  # popped: no loop repeats
        yield checkpoint_id, bool(may_hold_snapshot)


def _stored_messages(
    cur: sqlite3.Cursor, serde: Any, thread_id: str, namespace: str, checkpoint_id: str
) -> Any:
    """The messages a checkpoint stores itself (a snapshot), or None."""
    cur.execute(
        "SELECT type, checkpoint FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        (thread_id, namespace, checkpoint_id),
    )
    row = cur.fetchone()
    checkpoint = serde.loads_typed((row[0], row[1])) if row else {}
    return checkpoint.get("channel_values", {}).get("messages")
