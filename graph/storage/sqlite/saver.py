"""Ferry's SQLite saver: one file (WAL, busy timeout) shared by the CLI, Python and the server.

Checkpoints and writes live in Ferry's own tables (`graph.storage.sqlite.layout`: small keys,
one row per step and per task). Messages are stored as the writes of each step, so a thread's
file grows with its conversation, not with its square; a long thread's are also stored in
parts (`graph.storage.sqlite.parts`). This module is the whole saver, read top to bottom: the
connection and its lock, reading (`get_tuple`, `list`), writing (`put`, `put_writes`, started
calls), whole threads (delete, prune, a run's rollback), the summary rows `ferry threads`
lists, and the messages' history, rebuilt from the nearest history known. The async methods
run the sync ones in worker threads. Files of an older layout are brought up to date when
opened (`graph.storage.sqlite.layout_versions`); `ferry migrate` and `ferry export` are
their own modules.

Two words for where a history is: **cached**, in this process's memory (the saver's
`cached_histories`, `graph.storage.history.messages`); **stored**, in the file.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import shlex
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    writes_sort_key,
)

from graph.storage.codec.reads import StoredValueError, naming_thread
from graph.storage.history.messages import (
    PART,
    CachedHistories,
    History,
    Key,
    StepsPutHere,
    folded,
    latest_key,
    named_key,
    no_messages,
    seeded,
)
from graph.storage.internals import (
    SNAPSHOT_COUNTERS,
    DeltaChannelHistory,
    DeltaSnapshot,
    run_writes_on_start,
    snapshot_value,
    stock_next_version,
    superstep_snapshot_bound,
)
from graph.storage.sqlite import layout, layout_versions, parts
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, Record, key_of, text_of
from graph.storage.threads import reading as stored_threads
from graph.storage.threads.summaries import LISTING_SQLITE, SAVE_SQLITE, Row

if TYPE_CHECKING:
    from graph.storage.codec.serde import FerrySerializer
    from graph.storage.history.folding import Fold
    from graph.storage.leases.sqlite import LeaseStore

__all__ = ["FerrySaver", "connect", "open_file", "read_only"]

log = logging.getLogger("ferry.saver")

# -- SQL ---------------------------------------------------------------------------------------

_OPENING_STATEMENTS = (
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
)
"""Run on every connection to a Ferry SQLite file, by the CLI, Python and the server alike."""

_STEP = "SELECT id, parent, type, value, metadata FROM ferry_steps WHERE thread = ? AND ns = ?"
"""A thread namespace's steps (add `AND id = ?` for one)."""
_WRITES = "SELECT task, task_path, records FROM ferry_writes WHERE thread = ? AND ns = ? AND id = ?"
_STEPS_WITH_THREADS = (
    "SELECT s.thread, t.thread_id, s.ns, s.id, s.parent, s.type, s.value, s.metadata "
    "FROM ferry_steps AS s JOIN ferry_threads AS t ON t.id = s.thread"
)
_PUT_STEP = "INSERT OR REPLACE INTO ferry_steps VALUES (?, ?, ?, ?, ?, ?, ?, NULL)"
_ADD_WRITES = "INSERT INTO ferry_writes VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
_TASK = "WHERE thread = ? AND ns = ? AND id = ? AND task = ?"
_RECORD_START = "INSERT OR IGNORE INTO ferry_started_calls VALUES (?, ?)"
_FORGET_START = "DELETE FROM ferry_started_calls WHERE thread_id = ? AND tool_call_id = ?"
_DELETE_FERRY_ROWS = (
    "DELETE FROM ferry_started_calls WHERE thread_id = ?",
    "DELETE FROM ferry_thread_summaries WHERE thread_id = ?",
)
"""Ferry's own rows of a thread, deleted with its checkpoints."""
_THREADS_WITH_STEPS = (
    "SELECT thread_id FROM ferry_threads AS t WHERE EXISTS "
    "(SELECT 1 FROM ferry_steps AS s WHERE s.thread = t.id AND s.ns = '')"
)
"""Ids of the threads that have checkpoints on their main namespace."""
_NEW_ROOT = (
    "UPDATE ferry_steps SET parent = NULL, snapshot = ?, type = ?, value = ?, "
    "metadata = NULL WHERE thread = ? AND ns = ? AND id = ?"
)
_NEWEST_PART = "SELECT coalesce(max(end), 0) FROM ferry_parts WHERE thread = ? AND ns = ?"
# A checkpoint's ancestors, nearest first, by parent links (ids are not ordered across
# processes), each with whether it holds the messages itself. CROSS JOIN keeps each step a
# primary-key lookup; the walk reads no more of it than it needs.
_CHAIN = (
    "WITH RECURSIVE chain(id, parent, snapshot) AS ("
    "SELECT id, parent, snapshot FROM ferry_steps WHERE thread = ? AND ns = ? AND id = ? "
    "UNION ALL SELECT s.id, s.parent, s.snapshot FROM chain AS c CROSS JOIN ferry_steps AS s "
    "ON s.thread = ? AND s.ns = ? AND s.id = c.parent) "
    "SELECT id, snapshot FROM chain"
)

# -- the file ----------------------------------------------------------------------------------

_BUSY_TIMEOUT_S = 30
_NOT_ASKED = Path()


def read_only(path: Path) -> bool:
    """Whether the file exists but may not be written (by permission, or by its mode for root)."""
    if not path.is_file():
        return False
    return not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222


def connect(path: Path) -> sqlite3.Connection:
    """Open the checkpoint database, creating its folder, tuned for several writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    for statement in _OPENING_STATEMENTS:
        # Turning a new file to WAL takes a moment's exclusive lock, and SQLite answers "database
        # is locked" there without its busy handler: processes opening a new file at once wait.
        while True:
            try:
                conn.execute(statement)
                break
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(0.01)
    return conn


def open_file(path: Path) -> sqlite3.Connection:
    """Connect to the SQLite file; read-only when it may not be written, so it can still be read."""
    if not read_only(path):
        return connect(path)
    uri = f"{path.absolute().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
    conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_S * 1000}")
    return conn


_NOTICED: set[str] = set()  # the files whose rows in LangGraph's tables were spoken of


def _notice_langgraph_rows(conn: sqlite3.Connection, path: str) -> None:
    """Say once per file and process that its threads in LangGraph's tables are not read."""
    if not path or path in _NOTICED or not layout_versions.has_table(conn, "checkpoints"):
        return
    (found,) = conn.execute("SELECT COUNT(DISTINCT thread_id) FROM checkpoints").fetchone()
    if found:
        _NOTICED.add(path)
        log.warning(
            "%s holds %d thread(s) in LangGraph's tables, which Ferry does not read; to convert "
            "Ferry's: ferry migrate %s",
            path, found, shlex.quote(path),
        )  # fmt: skip


# -- the saver ---------------------------------------------------------------------------------


class FerrySaver(BaseCheckpointSaver[Any]):
    """A SQLite saver in Ferry's layout that caches the histories it rebuilt, in memory.

    `fold` is the `messages` reducer (`graph.storage.history.folding`), handed in by whoever
    opens the saver; without one, LangGraph folds the writes with the graph's. A `FerryStore`
    (`graph.storage.ferry_store`): the loop and the CLI rely on it as one.

    Every read and write goes through `cursor`: one connection shared by the threads of a
    process (LangGraph runs sync nodes in worker threads), serialised by one lock; a
    transaction per outermost cursor.
    """

    fold: Fold | None = None

    def __init__(
        self,
        conn: sqlite3.Connection,
        serde: FerrySerializer | None = None,
        *,
        fold: Fold | None = None,
    ) -> None:
        if serde is None:
            from graph.storage.codec.serde import serializer  # the settings' one

            serde = serializer()
        super().__init__(serde=serde)
        self.conn = conn
        """The connection (after `setup`, a copy in memory for a read-only file of old rows)."""
        self.lock = threading.Lock()
        """The lock every cursor takes."""
        self.is_setup = False
        """Whether the file is ready for Ferry's reads and writes."""
        self.fold = fold
        self.cached_histories = CachedHistories()
        self.cached_steps = StepsPutHere(self.cached_histories)
        # Per (thread, namespace): the length of the history at the newest stored part known.
        self._part_ends: dict[tuple[str, str], int] = {}
        self._thread_numbers: dict[str, int] = {}  # thread id → its number (numbers never change)
        self._cursor_thread: int | None = None  # the thread inside `cursor`, while one is
        self._outer_commits = False  # whether that outermost cursor commits when it closes
        self._path: Path | None = _NOT_ASKED

    # -- the file --------------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The file the connection opened; None in memory.

        Asked once: every run would otherwise wait for the lock.
        """
        if self._path is _NOT_ASKED:
            with self.lock:
                self._note_path()
        return self._path

    def _note_path(self) -> None:
        if self._path is _NOT_ASKED:
            name = layout_versions.file_of(self.conn)
            self._path = Path(name) if name else None

    def setup(self) -> None:
        """Make the file ready for Ferry's reads and writes, once: its tables, at this layout.

        A file of a newer layout is refused (`layout_versions`). A read-only file of an older
        one is read from a copy in memory, which replaces the connection (and refuses writes:
        a turn written to it would be lost at exit). Threads in LangGraph's tables are never
        moved here, only reported once (`ferry migrate FILE` converts them).
        """
        if self.is_setup:
            return
        self._note_path()  # before a copy in memory of a read-only file replaces the connection
        path = layout_versions.file_of(self.conn)
        ready = layout_versions.up_to_date(self.conn, self.serde)  # newer refused; older migrated
        _notice_langgraph_rows(ready, path)
        if ready is not self.conn:  # read-only, of an older layout: a copy in memory
            ready.execute("PRAGMA query_only = ON")
            self.conn = ready
        self.is_setup = True

    def close(self) -> None:
        """Close the connection, once a save in progress is done.

        A run that failed may still be saving a checkpoint from a worker thread; closing the
        connection under its feet crashes SQLite, so this waits for the saver's lock first.
        """
        with self.lock:
            self.conn.close()

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor under the lock (the file set up first), committed when closed if `transaction`.

        Inside one this thread already holds, a cursor in the same transaction.
        """
        if self._cursor_thread == threading.get_ident():
            cur = self.conn.cursor()  # the lock is this thread's already (it is not reentrant)
            try:
                yield cur
            finally:
                if transaction and not self._outer_commits:
                    self.conn.commit()
                cur.close()
            return
        with self.lock:
            self.setup()
            cur = self.conn.cursor()
            self._cursor_thread, self._outer_commits = threading.get_ident(), transaction
            try:
                yield cur
            finally:
                self._cursor_thread = None
                if transaction:
                    self.conn.commit()
                cur.close()

    def _begin_writing(self, cur: sqlite3.Cursor) -> None:
        """Take the file's write lock before a transaction that reads, then writes.

        Its reads then see what it writes over; a transaction that read first and wrote later
        would fail at once if another process had committed in between ("database is locked",
        which the busy timeout does not wait out).
        """
        if not self.conn.in_transaction:
            cur.execute("BEGIN IMMEDIATE")

    def _thread_number(self, cur: sqlite3.Cursor, thread_id: str) -> int | None:
        """The number a thread's rows are stored under; None if it has none."""
        if (number := self._thread_numbers.get(thread_id)) is not None:
            return number
        cur.execute("SELECT id FROM ferry_threads WHERE thread_id = ?", (thread_id,))
        row = cur.fetchone()
        if row is None:
            return None
        self._thread_numbers[thread_id] = int(row[0])
        return int(row[0])

    def _numbered(self, cur: sqlite3.Cursor, thread_id: str) -> int:
        """The number a thread's rows are stored under, given one if it has none yet."""
        if (number := self._thread_number(cur, thread_id)) is not None:
            return number
        cur.execute("INSERT OR IGNORE INTO ferry_threads (thread_id) VALUES (?)", (thread_id,))
        number = self._thread_number(cur, thread_id)
        if number is None:
            raise sqlite3.DatabaseError(f"thread {thread_id}: not numbered in ferry_threads")
        return number

    # -- reading ---------------------------------------------------------------------------
    # A step's row holds its checkpoint and metadata in one value; its pending writes are one
    # row per task, their records packed, a `messages` write possibly a reference into a part.

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names, or its thread's newest, with its pending writes."""
        thread_id = str(config["configurable"]["thread_id"])
        namespace = config["configurable"].get("checkpoint_ns", "")
        with self.cursor(transaction=False) as cur, naming_thread(config):
            number = self._thread_number(cur, thread_id)
            if number is None:
                return None
            if checkpoint_id := get_checkpoint_id(config):
                cur.execute(f"{_STEP} AND id = ?", (number, namespace, key_of(checkpoint_id)))
            else:
                cur.execute(f"{_STEP} ORDER BY id DESC LIMIT 1", (number, namespace))
            row = cur.fetchone()
            if row is None:
                return None
            pending = self._pending(cur, number, namespace, row[0])
            return self._tuple(thread_id, namespace, row, pending)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - the saver interface's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The matching checkpoints, newest first (by id, as LangGraph's savers order them)."""
        where: builtins.list[str] = ["1"]
        params: builtins.list[Any] = []
        configurable = (config or {}).get("configurable", {})
        with self.cursor(transaction=False) as cur:
            if "thread_id" in configurable:
                number = self._thread_number(cur, str(configurable["thread_id"]))
                if number is None:
                    return
                where.append("s.thread = ?")
                params.append(number)
            if "checkpoint_ns" in configurable:
                where.append("s.ns = ?")
                params.append(configurable["checkpoint_ns"])
            if checkpoint_id := configurable.get("checkpoint_id"):
                where.append("s.id = ?")
                params.append(key_of(checkpoint_id))
            if before is not None and (before_id := get_checkpoint_id(before)):
                where.append("s.id < ?")
                params.append(key_of(before_id))
            cur.execute(
                f"{_STEPS_WITH_THREADS} WHERE {' AND '.join(where)} ORDER BY s.id DESC", params
            )
            rows = cur.fetchall()
        found = 0
        for number, thread_id, namespace, *step in rows:
            if limit is not None and found >= limit:
                return
            with naming_thread({"configurable": {"thread_id": thread_id}}):
                values = self.step_values(*step[2:])
                if filter and not all(values[1].get(k) == v for k, v in filter.items()):
                    continue
                with self.cursor(transaction=False) as cur:
                    pending = self._pending(cur, number, namespace, step[0])
                found += 1
                saved = self._tuple(thread_id, namespace, step, pending, values)
            yield saved  # outside the read: what the caller reads meanwhile is not part of it

    def _pending(
        self, cur: sqlite3.Cursor, number: int, namespace: str, key: Any
    ) -> builtins.list[PendingWrite]:
        """A checkpoint's pending writes, decoded, in LangGraph's order (`writes_sort_key`)."""
        cur.execute(_WRITES, (number, namespace, key))
        writes = [
            (text_of(task), task_path, record)
            for task, task_path, records in cur.fetchall()
            for record in layout.unpacked(records)
        ]
        if not writes:  # a finished step's: the usual case when a turn starts
            return []
        writes.sort(key=lambda w: writes_sort_key(w[1], w[0], w[2][0]))
        resolver = parts.Resolver(cur, self.serde, number, namespace)
        return [(task, channel, resolver.value(t, v)) for task, _, (_, channel, t, v) in writes]

    def _tuple(
        self,
        thread_id: str,
        namespace: str,
        row: Sequence[Any],
        pending: builtins.list[PendingWrite],
        values: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> CheckpointTuple:
        key, parent, type_tag, value, metadata_text = row
        checkpoint_id = text_of(key)
        checkpoint, metadata = values or self.step_values(type_tag, value, metadata_text)
        configurable = {"thread_id": thread_id, "checkpoint_ns": namespace}
        return CheckpointTuple(
            {"configurable": {**configurable, "checkpoint_id": checkpoint_id}},
            {**checkpoint, "id": checkpoint_id},  # type: ignore[typeddict-item]  # stored without its id
            metadata,  # type: ignore[arg-type]  # a stored dict: LangGraph's metadata keys
            None
            if parent is None
            else {"configurable": {**configurable, "checkpoint_id": text_of(parent)}},
            pending,
        )

    def step_values(
        self, stored_type: Any, value: bytes, metadata_text: str | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A stored step's checkpoint and metadata."""
        type_tag = layout.name_of(stored_type)
        if metadata_text is not None:  # moved from LangGraph's table as it was
            checkpoint = self.serde.loads_typed((type_tag, value))
            pair: Any = (checkpoint, layout.legacy_metadata(metadata_text))
        else:
            pair = self.serde.loads_typed((type_tag, value))
        if (
            isinstance(pair, builtins.list | tuple)
            and len(pair) == 2
            and isinstance(pair[0], dict)
            and isinstance(pair[1], dict)
        ):
            return pair[0], pair[1]
        raise StoredValueError("a stored checkpoint is not in Ferry's form")

    # -- writing ---------------------------------------------------------------------------
    # A checkpoint put here also gets its messages' history folded from memory when it can be
    # (`graph.storage.history.messages`), its thread's summary row in the same transaction, and,
    # past `PART` new messages, a stored part.

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint, and with it the thread's summary row."""
        configurable = config["configurable"]
        thread_id, namespace = str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")
        parent = configurable.get("checkpoint_id")
        key = (thread_id, namespace, checkpoint["id"])
        cached = None
        seed = checkpoint["channel_values"].get(UNBOUNDED_CHANNEL)
        if parent and seed is None:
            cached = self.cached_steps.fold((thread_id, namespace, parent), key, self.fold)
        elif parent and isinstance(seed, DeltaSnapshot) and self._forced_by_supersteps(config):
            cached = self.cached_steps.fold((thread_id, namespace, parent), key, self.fold)
            if cached is not None and cached == snapshot_value(seed):  # what the writes give
                values = dict(checkpoint["channel_values"])
                del values[UNBOUNDED_CHANNEL]
                checkpoint = {**checkpoint, "channel_values": values}
            else:  # an Overwrite, or a branch: the snapshot is the history, stored as given
                cached = None
        stored = {k: v for k, v in checkpoint.items() if k != "id"}
        type_tag, value = self.serde.dumps_typed([stored, layout.stored_metadata(config, metadata)])
        snapshot = int(UNBOUNDED_CHANNEL in checkpoint["channel_values"])
        saved: RunnableConfig = {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint["id"],
            }
        }
        with self.cursor() as cur:
            number = self._numbered(cur, thread_id)
            cur.execute(
                _PUT_STEP,
                (number, namespace, key_of(checkpoint["id"]), parent and key_of(parent),
                 snapshot, layout.code_of(type_tag), value),
            )  # fmt: skip
            self.cached_steps.put_here(key)
            # In the same transaction: one commit a step. It reads the new checkpoint's
            # history, which the fold has normally just made.
            self._summary_after_put(saved, checkpoint)
        if cached is not None:  # after the commit: the file's write lock is not held meanwhile
            self._store_parts(number, key, cached)
        return saved

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes at a checkpoint, as LangGraph's savers would.

        A write already stored at the same index is kept, unless every write given is one of
        LangGraph's special ones (an error, an interrupt, a resume value), which replace.
        """
        configurable = config["configurable"]
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        new: builtins.list[Record] = [
            (WRITES_IDX_MAP.get(channel, idx), channel, *self.serde.dumps_typed(value))
            for idx, (channel, value) in enumerate(writes)
        ]
        with self.cursor() as cur:
            number = self._numbered(cur, str(configurable["thread_id"]))
            key = (
                number,
                configurable.get("checkpoint_ns", ""),
                key_of(str(configurable["checkpoint_id"])),
                key_of(task_id),
            )
            records = layout.packed(layout.merged([], new, replace))
            cur.execute(_ADD_WRITES, (*key, task_path, records))
            if cur.rowcount == 1:
                self.cached_steps.writes_put(_step_key(config), task_id, task_path, writes)
                return
            self.cached_steps.writes_unknown(_step_key(config))  # the file has the whole story
            cur.execute(f"SELECT records FROM ferry_writes {_TASK}", key)
            stored = layout.unpacked(cur.fetchone()[0])
            cur.execute(
                f"UPDATE ferry_writes SET task_path = ?, records = ? {_TASK}",
                (task_path, layout.packed(layout.merged(stored, new, replace)), *key),
            )

    def _forced_by_supersteps(self, config: RunnableConfig) -> bool:
        """Whether LangGraph snapshots `messages` here only because of its superstep bound.

        That snapshot is the whole history again every few thousand supersteps (storage would
        grow with the square of a thread); one a channel asks for (its `snapshot_frequency`)
        is kept as given. Read from the parent's counters, as LangGraph decided from them.
        """
        parent = self.get_tuple(config)
        counters = (parent.metadata if parent else {}).get(SNAPSHOT_COUNTERS) or {}
        counted = counters.get(UNBOUNDED_CHANNEL) if isinstance(counters, dict) else None
        if not isinstance(counted, builtins.list | tuple) or len(counted) != 2:
            return False
        return int(counted[1]) + 1 >= superstep_snapshot_bound()

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        with self.cursor() as cur:
            cur.execute(_RECORD_START, (thread_id, tool_call_id))
            return bool(cur.rowcount == 1)

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        with self.cursor() as cur:
            cur.execute(_FORGET_START, (thread_id, tool_call_id))

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The version after `current`, in the format of the thread it belongs to.

        Ferry's compact one (`graph.storage.sqlite.layout.next_version`), or LangGraph's for a
        thread another saver began.
        """
        if layout.is_langgraphs(current):
            return stock_next_version(current)
        return layout.next_version(current)

    # -- whole threads ---------------------------------------------------------------------

    def thread_ids(self) -> builtins.list[str]:
        """Ids of the stored threads."""
        with self.cursor(transaction=False) as cur:
            return [row[0] for row in cur.execute(_THREADS_WITH_STEPS).fetchall()]

    def namespaces(self, thread_id: str) -> builtins.list[str]:
        """The checkpoint namespaces a thread has checkpoints in."""
        with self.cursor(transaction=False) as cur:
            number = self._thread_number(cur, thread_id)
            if number is None:
                return []
            cur.execute("SELECT DISTINCT ns FROM ferry_steps WHERE thread = ?", (number,))
            return [row[0] for row in cur.fetchall()]

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and Ferry's rows, and forget its histories."""
        thread_id = str(thread_id)
        with self.cursor() as cur:
            number = self._thread_number(cur, thread_id)
            if number is not None:  # its number stays: another process may still hold it
                for table in ("ferry_steps", "ferry_writes", "ferry_parts"):
                    cur.execute(f"DELETE FROM {table} WHERE thread = ?", (number,))
            for statement in _DELETE_FERRY_ROWS:
                cur.execute(statement, (thread_id,))
        self.cached_histories.forget(thread_id)
        for thread in [k for k in self._part_ends if k[0] == thread_id]:
            del self._part_ends[thread]

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints the runs made, their writes, and what they left on the others.

        The server's `multitask_strategy="rollback"` runs it. A run is named only in its
        checkpoints' metadata (`run_id`), stored inside each step's value, so finding them
        reads every step of the file. What a deleted run leaves on the steps that stay is
        deleted with it, so the thread reads as if the run had never started:
        - the question it was given, stored on the checkpoint it started from (LangGraph keeps
          a delta channel's input there, under a task id made from that checkpoint's id, which
          the next run from it reuses: a question left there would be read in place of the
          next one);
        - a resume value or update it was given there (`NULL_TASK_ID`), as LangGraph stores
          those;
        - the parts holding its messages (writes that stay and refer into them get their values
          back), and the thread's summary row, if it described one of its checkpoints.
        Tool calls it started stay recorded as started: their side effects happened.
        """
        wanted = {str(run_id) for run_id in run_ids}
        if not wanted:
            return
        with self.cursor() as cur:
            self._begin_writing(cur)
            doomed = self._steps_of_runs(cur.connection.execute(_STEPS_WITH_THREADS), wanted)
            for (number, thread_id, namespace), steps in doomed.items():
                self._delete_run_steps(cur, number, namespace, steps)
                if not namespace:
                    marks = ",".join("?" * len(steps))
                    cur.execute(
                        "DELETE FROM ferry_thread_summaries "
                        f"WHERE thread_id = ? AND checkpoint_id IN ({marks})",
                        (thread_id, *steps),
                    )
        for (_, thread_id, namespace), steps in doomed.items():
            self.cached_histories.forget(thread_id, namespace)
            self._part_ends.pop((thread_id, namespace), None)
            for parent in steps.values():
                if parent is not None:
                    self.cached_steps.writes_unknown((thread_id, namespace, text_of(parent)))

    def _steps_of_runs(
        self, rows: Any, wanted: set[str]
    ) -> dict[tuple[int, str, str], dict[Any, Any]]:
        """The runs' steps, by thread number, id and namespace: each step's key to its parent's."""
        found: dict[tuple[int, str, str], dict[Any, Any]] = defaultdict(dict)
        for number, thread_id, namespace, key, parent, type_tag, value, metadata in rows:
            with naming_thread({"configurable": {"thread_id": thread_id}}):
                try:
                    _, stored_metadata = self.step_values(type_tag, value, metadata)
                except StoredValueError:  # unreadable here: not known to be the run's, so kept
                    continue
            if str(stored_metadata.get("run_id")) in wanted:
                found[(number, thread_id, namespace)][key] = parent
        return found

    def _delete_run_steps(
        self, cur: sqlite3.Cursor, number: int, namespace: str, steps: dict[Any, Any]
    ) -> None:
        """Delete a thread namespace's `steps`, and what their run left on the steps that stay."""
        keys = builtins.list(steps)
        marks = ",".join("?" * len(keys))
        parts.drop_at(cur, self.serde, number, namespace, set(keys))
        where = f"thread = ? AND ns = ? AND id IN ({marks})"
        cur.execute(f"DELETE FROM ferry_steps WHERE {where}", (number, namespace, *keys))
        cur.execute(f"DELETE FROM ferry_writes WHERE {where}", (number, namespace, *keys))
        for parent in {p for p in steps.values() if p is not None and p not in steps}:
            cur.execute(
                "SELECT 1 FROM ferry_steps WHERE thread = ? AND ns = ? AND parent = ? LIMIT 1",
                (number, namespace, parent),
            )
            if cur.fetchone() is not None:  # another run went on from it: its writes are its own
                continue
            for task in run_writes_on_start(text_of(parent)):
                cur.execute(
                    f"DELETE FROM ferry_writes {_TASK}", (number, namespace, parent, key_of(task))
                )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each thread's latest checkpoint per namespace, or (`delete`) nothing.

        `keep_latest` keeps everything that checkpoint needs: its history is stored into it
        first (`prune_thread`). This is what `langgraph.json`'s `checkpointer.ttl` and
        `ferry prune` run.
        """
        for thread_id in map(str, thread_ids):
            if strategy in ("delete", "delete_all"):
                self.delete_thread(thread_id)
                continue
            if strategy != "keep_latest":
                raise ValueError(f"unknown prune strategy {strategy!r}")
            for namespace in self.namespaces(thread_id):
                self.prune_thread(thread_id, keep=1, namespace=namespace)

    def prune_checkpoints(self, thread_ids: Sequence[str], *, keep: int) -> int:
        """Keep the newest `keep` checkpoints of each thread; return how many went."""
        return sum(self.prune_thread(thread_id, keep) for thread_id in thread_ids)

    def prune_thread(self, thread_id: str, keep: int, namespace: str = "") -> int:
        """Keep a thread's newest `keep` checkpoints (its current branch); return how many went.

        Messages are stored as each step's writes, so the oldest kept checkpoint first receives
        the whole history it stands on; it then no longer needs any ancestor. The newest
        checkpoint and its pending writes (what a resume runs from) are always kept. Only
        `namespace` is pruned.
        """
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}
        }
        chain: builtins.list[CheckpointTuple] = []
        current = self.get_tuple(config)
        while current is not None and len(chain) < max(keep, 1):
            chain.append(current)
            current = self.get_tuple(current.parent_config) if current.parent_config else None
        if current is None:  # nothing older
            return 0
        kept = [c.config["configurable"]["checkpoint_id"] for c in chain]
        return self.keep_only(chain[-1].config, kept, self._standing_alone(chain[-1]))

    def _standing_alone(self, oldest: CheckpointTuple) -> dict[str, Any]:
        """The oldest kept checkpoint with the messages it stands on stored in it (if any)."""
        checkpoint = dict(oldest.checkpoint)
        values = oldest.checkpoint["channel_values"]
        if "messages" in oldest.checkpoint["channel_versions"] and "messages" not in values:
            history = self.get_delta_channel_history(config=oldest.config, channels=["messages"])
            entry = history["messages"]
            messages = snapshot_value(entry.get("seed"))
            if entry["writes"]:  # not folded by Ferry: only the graph's own reducer could
                thread_id = oldest.config["configurable"]["thread_id"]
                raise ValueError(f"thread {thread_id}: its messages are not Ferry's; not pruned")
            checkpoint["channel_values"] = {**values, "messages": DeltaSnapshot(messages)}
        return checkpoint

    def keep_only(self, config: RunnableConfig, kept: Sequence[str], oldest: dict[str, Any]) -> int:
        """Delete a namespace's checkpoints but `kept`; the oldest kept becomes `oldest`, a root.

        Returns how many checkpoints went.
        """
        thread_id = str(config["configurable"]["thread_id"])
        namespace = config["configurable"].get("checkpoint_ns", "")
        keys = [key_of(checkpoint_id) for checkpoint_id in kept]
        marks = ",".join("?" * len(keys))
        with self.cursor() as cur:
            self._begin_writing(cur)
            number = self._thread_number(cur, thread_id)
            if number is None:
                return 0
            cur.execute(f"{_STEP} AND id = ?", (number, namespace, keys[-1]))
            row = cur.fetchone()
            _, metadata = self.step_values(*row[2:])
            stored = {k: v for k, v in oldest.items() if k != "id"}
            type_tag, value = self.serde.dumps_typed([stored, metadata])
            cur.execute(
                _NEW_ROOT,
                (int(UNBOUNDED_CHANNEL in oldest["channel_values"]), layout.code_of(type_tag),
                 value, number, namespace, keys[-1]),
            )  # fmt: skip
            where = f"thread = ? AND ns = ? AND id NOT IN ({marks})"
            cur.execute(f"DELETE FROM ferry_steps WHERE {where}", (number, namespace, *keys))
            removed = int(cur.rowcount)
            cur.execute(f"DELETE FROM ferry_writes WHERE {where}", (number, namespace, *keys))
            parts.drop(cur, self.serde, number, namespace)
        self._part_ends.pop((thread_id, namespace), None)
        self.cached_histories.forget(thread_id, namespace, kept)
        return removed

    def threads_updated_before(self, cutoff: datetime) -> builtins.list[str]:
        """Ids of the threads whose last checkpoint is older than `cutoff` (timezone-aware)."""
        return stored_threads.threads_updated_before(self, cutoff)

    def stored_bytes(self) -> int:
        """Disk space the threads take: the file and its write-ahead log; 0 in memory."""
        path = self.path
        if path is None:
            return 0
        files = (path, path.with_name(path.name + "-wal"))
        return sum(p.stat().st_size for p in files if p.exists())

    def compact(self) -> None:
        """Give freed space back to the file system (`VACUUM`)."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def leases(self, timeout_s: float, *, holder: str) -> LeaseStore | None:
        """Leases in the file's `ferry_leases` table; None in memory or for a read-only file."""
        from graph.storage.leases.sqlite import SqliteLeases  # only runs take leases, not reads

        path = self.path
        # A read-only file is never continued: a lease would write it (root may, by mode).
        if path is None or read_only(path):
            return None
        return SqliteLeases(path, timeout_s, holder=holder)

    # -- summary rows ----------------------------------------------------------------------
    # Every checkpoint put on a thread's main namespace rewrites the thread's row
    # (`graph.storage.threads.summaries`). The history it counts is the one the saver caches
    # for the next step anyway, so the row costs the fold of one step's writes, and one small
    # write, in the same transaction as the checkpoint. A row names its checkpoint as
    # `ferry_steps` stores the id (`layout.key_of`).

    def thread_summaries(self) -> builtins.list[tuple[Any, ...]]:
        """Each thread's listing row (`graph.storage.threads.summaries.LISTING_SQLITE`)."""
        with self.cursor(transaction=False) as cur:
            return [tuple(row) for row in cur.execute(LISTING_SQLITE).fetchall()]

    def store_summary(self, row: Row) -> None:
        """Write a thread's summary row; nothing if the file may not be written."""
        thread_id, checkpoint_id, *rest = row
        try:
            with self.cursor() as cur:
                cur.execute(SAVE_SQLITE, (thread_id, key_of(checkpoint_id), *rest))
        except sqlite3.OperationalError as error:
            log.debug("summary of %s not stored: %s", thread_id, error)

    def _summary_after_put(self, saved: RunnableConfig, checkpoint: Checkpoint) -> None:
        """Write the thread's summary row (main namespace), as its checkpoint was put."""
        if saved["configurable"].get("checkpoint_ns"):
            return
        cached = self.cached_history(saved)
        if cached is not None:  # the usual case: nothing to read, nothing to copy
            row: Row | None = stored_threads.row_from(self.serde, saved, checkpoint, cached)
        else:
            row = stored_threads.summary_after_put(self, saved, checkpoint)
        if row is not None:
            self.store_summary(row)

    # -- the messages' history -------------------------------------------------------------
    # A checkpoint never changes once written, so the history rebuilt at a checkpoint stays
    # true: a running process replays only a step's new writes; a new one (`ferry history`, a
    # restarted server) replays the thread's in one range query (`replay`), from its newest
    # stored part.

    def cached_history(self, config: RunnableConfig) -> builtins.list[Any] | None:
        """The messages at the checkpoint `config` names, if this process caches them.

        The list is the one cached: not to be changed.
        """
        return self.cached_histories.get(_step_key(config))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild `messages` from the nearest cached (or snapshot, or part) checkpoint onwards."""
        with naming_thread(config):
            if builtins.list(channels) != [UNBOUNDED_CHANNEL]:
                return super().get_delta_channel_history(config=config, channels=channels)
            return self._messages_history(config)

    def _messages_history(self, config: RunnableConfig) -> History:
        from graph.storage.codec.serde import collection_paused

        key = named_key(config) or latest_key(self.get_tuple(config))
        if key is None:
            return no_messages()
        if (known := self.cached_histories.get(key)) is not None:
            return seeded(known)
        found: builtins.list[builtins.list[Any]] = []  # the cached history the walk started at
        # The histories this process caches on the thread, by stored key: the walk then asks
        # about each ancestor without spelling its id.
        cached_keys = {
            key_of(at): (*key[:2], at) for at in self.cached_histories.of_thread(key[:2])
        }

        def cached(step: Any) -> builtins.list[Any] | None:
            ancestor = cached_keys.get(step)
            if ancestor is not None and (known := self.cached_histories.get(ancestor)) is not None:
                found.append(known)
                return known
            return None

        with self.cursor(transaction=False) as cur, collection_paused():
            number = self._thread_number(cur, key[0])
            if number is None:
                return no_messages()
            replayed = replay(
                cur, self.serde, self.step_values, (number, key[1], key_of(key[2])), cached
            )
        writes = [value for _, _, value in replayed["writes"]]
        seed = replayed.get("seed")
        messages = folded(seed, writes, self.fold, checked=bool(found) and found[-1] is seed)
        if messages is None:
            # An edit in Studio, or not Ferry's messages: LangGraph's reducer, with the task ids.
            replayed["writes"] = [(text_of(t), c, v) for t, c, v in replayed["writes"]]
            return {"messages": replayed}
        self.cached_histories.cache(key, messages)
        self._store_parts(number, key, messages)
        return seeded(messages)

    def _store_parts(self, number: int, key: Key, messages: builtins.list[Any]) -> None:
        """Store the history as a part once it has grown by `PART` since the newest."""
        from graph.storage.codec.serde import collection_paused

        thread = key[:2]
        if (end := self._part_ends.get(thread)) is None:
            with self.cursor(transaction=False) as cur:
                cur.execute(_NEWEST_PART, (number, thread[1]))
                end = self._part_ends[thread] = int(cur.fetchone()[0])
        if len(messages) < end + PART:
            return
        target = key_of(key[2])
        try:
            with self.cursor() as cur, collection_paused():
                self._begin_writing(cur)
                walk = ancestors(cur, number, thread[1], target)
                self._part_ends[thread] = parts.compact(
                    cur, self.serde, (number, thread[1]), target, messages, walk
                )
        except sqlite3.OperationalError as error:  # e.g. a read-only file: only speed is lost
            log.debug("history of %s not stored in parts: %s", thread[0], error)
            self._part_ends[thread] = len(messages)

    # -- async: the sync methods in worker threads -----------------------------------------
    # The saver already serialises its connection with its lock, so this is all `ainvoke`,
    # `astream`, `aget_state` and the LangGraph server (`graph.server.checkpointer`) need,
    # and the event loop never waits on SQLite.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """`get_tuple`, off the event loop."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - the saver interface's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """`list`, off the event loop (read whole, as the sync saver reads it)."""
        found = await asyncio.to_thread(
            lambda: builtins.list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`put`, off the event loop."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """`put_writes`, off the event loop."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """`delete_thread`, off the event loop."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """`delete_for_runs`, off the event loop."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`prune`, off the event loop."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """`get_delta_channel_history`, off the event loop."""
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )


def _step_key(config: RunnableConfig) -> Key:
    """(thread_id, checkpoint_ns, checkpoint_id) of the checkpoint `config` names."""
    configurable = config["configurable"]
    return (
        str(configurable["thread_id"]),
        configurable.get("checkpoint_ns", ""),
        str(configurable["checkpoint_id"]),
    )


# -- rebuilding a history: the ancestor walk and its one range query -------------------------
# Rebuilding the messages at a checkpoint means walking its ancestors back to the nearest one
# whose history is known (cached in memory, stored as a part, or a snapshot: LangGraph's, or
# the root of a pruned thread), then replaying the writes since.

StepValues = Callable[[str, bytes, "str | None"], tuple[dict[str, Any], dict[str, Any]]]
"""Decodes a stored step's (type, value, metadata) into its checkpoint and metadata."""


def ancestors(
    cur: sqlite3.Cursor, number: int, namespace: str, target: Any
) -> Generator[tuple[Any, int], None, None]:
    """A step's ancestors, nearest first, each with its snapshot flag.

    They are read on a cursor of their own, closed when the walk is: close a walk left
    unfinished before writing on the connection.
    """
    walk = cur.connection.cursor()
    try:
        walk.execute(_CHAIN, (number, namespace, target, number, namespace))
        walked: set[Any] = set()
        for step, snapshot in walk:
            if not walked:
                walked.add(step)  # the first row is the target itself
                continue
            if step in walked:
                return  # a re-put checkpoint made the chain loop
            walked.add(step)
            yield step, snapshot
    finally:
        # An open statement holds its read snapshot: a write on the connection after another
        # process committed would then fail at once ("database is locked"), not wait its turn.
        walk.close()


def replay(
    cur: sqlite3.Cursor,
    serde: Any,
    step_values: StepValues,
    key: tuple[int, str, Any],
    cached: Callable[[Any], list[Any] | None],
) -> DeltaChannelHistory:
    """The `messages` writes since the nearest known ancestor, and its history.

    Known: cached by this process, stored as a part (`graph.storage.sqlite.parts`), or a
    snapshot. `key` is (thread number, namespace, stored checkpoint key); `cached` is asked
    with stored keys too. The writes' task ids are left as stored (Ferry folds only their
    values). A snapshot must be honoured: when new input replaces an unfinished step,
    LangGraph takes one so the abandoned step's stored writes are not replayed.
    """
    number, namespace, target = key
    chain: list[Any] = []
    seed: Any = None
    known: parts.Index | None = None  # read once the walk gets past what this process caches
    with closing(ancestors(cur, number, namespace, target)) as walk:
        for step, snapshot in walk:
            seed = cached(step)
            if seed is None and known is None:
                known = parts.index(cur, number, namespace)
                if target in known:
                    history = parts.history_at(cur, serde, number, namespace, target, known)
                    return {"writes": [], "seed": history}
            chain.append(step)
            if seed is None and known is not None and step in known:
                seed = parts.history_at(cur, serde, number, namespace, step, known)
            if seed is None and snapshot:
                cur.execute(
                    "SELECT type, value, metadata FROM ferry_steps "
                    "WHERE thread = ? AND ns = ? AND id = ?",
                    (number, namespace, step),
                )
                checkpoint, _ = step_values(*cur.fetchone())
                seed = checkpoint.get("channel_values", {}).get(UNBOUNDED_CHANNEL)
            if seed is not None:
                break
    resolver = parts.Resolver(cur, serde, number, namespace)
    writes = message_writes(cur, resolver, number, namespace, chain) if chain else []
    entry: DeltaChannelHistory = {"writes": writes}
    if seed is not None:
        entry["seed"] = seed
    return entry


def message_writes(
    cur: sqlite3.Cursor,
    resolver: parts.Resolver,
    number: int,
    namespace: str,
    chain: list[Any],
) -> list[Any]:
    """The `messages` writes at the checkpoints in `chain`, oldest first, decoded."""
    return [
        (task, UNBOUNDED_CHANNEL, resolver.value(type_tag, value))
        for _, task, _, records in parts.writes_at(cur, number, namespace, chain)
        for _, channel, type_tag, value in layout.unpacked(records)
        if channel == UNBOUNDED_CHANNEL
    ]
