"""Ferry's SQLite saver: one file (WAL, busy timeout) shared by the CLI, Python and the server.

Checkpoints and writes live in Ferry's own tables (`graph.storage.sqlite.layout`). Messages are
stored as the writes of each step (see `graph.state`), so a thread's file grows with its
conversation, not with its square. Rebuilding the history means replaying those writes
(`graph.storage.history.replay`); `FerrySaver` remembers rebuilt histories so the next step replays
only what is new.
"""

from __future__ import annotations

import builtins
import logging
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Overwrite

from graph.state import fold_messages
from graph.storage.codec.allowlist import NamesThreadOnRefusal, StoredValueError, naming_thread
from graph.storage.codec.serde import FerrySerializer, collection_paused, serializer
from graph.storage.history import replay as history
from graph.storage.history.held import HeldHistories
from graph.storage.internals import DeltaChannelHistory, snapshot_value
from graph.storage.sqlite import layout, parts, versions
from graph.storage.sqlite.in_threads import AsyncInThreads
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, Record, key_of, text_of
from graph.storage.sqlite.opening import prepared
from graph.storage.sqlite.schema import (
    DELETE_FERRY_ROWS,
    FORGET_START,
    OPENING_STATEMENTS,
    RECORD_START,
)
from graph.storage.sqlite.summaries import SummarisesThreads

log = logging.getLogger("ferry.saver")
_STEP = "SELECT id, parent, type, value, metadata FROM ferry_steps WHERE thread = ? AND ns = ?"
_PUT_STEP = "INSERT OR REPLACE INTO ferry_steps VALUES (?, ?, ?, ?, ?, ?, ?, NULL)"
_WRITES = "SELECT task, task_path, records FROM ferry_writes WHERE thread = ? AND ns = ? AND id = ?"
THREADS_WITH_STEPS = (
    "SELECT thread_id FROM ferry_threads AS t WHERE EXISTS "
    "(SELECT 1 FROM ferry_steps AS s WHERE s.thread = t.id AND s.ns = '')"
)
"""Ids of the threads that have checkpoints on their main namespace."""


def connect(path: Path) -> sqlite3.Connection:
    """Open the checkpoint database, creating its folder, tuned for several writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    for statement in OPENING_STATEMENTS:
        conn.execute(statement)
    return conn


class FerrySaver(
    SummarisesThreads,
    NamesThreadOnRefusal,
    AsyncInThreads,
    BaseCheckpointSaver[str],
):
    """A SQLite saver in Ferry's layout that keeps the histories it rebuilt, in memory.

    A checkpoint never changes once written, so the history rebuilt at a checkpoint stays true:
    a running process replays only a step's new writes, a new one (`ferry history`, a restarted
    server) replays the thread's in one range query.
    """

    def __init__(self, conn: sqlite3.Connection, serde: FerrySerializer | None = None) -> None:
        super().__init__(serde=serde or serializer())
        self.conn = conn
        self.lock = threading.Lock()
        self.is_setup = False
        self._cursor_thread: int | None = None  # the thread inside `cursor`, while one is
        self._outer_commits = False  # whether that outermost cursor commits when it closes
        self._threads: dict[str, int] = {}  # thread id → its number (numbers never change)
        self._held = HeldHistories()
        # Per (thread, namespace): the length of the history at the newest part known here.
        self._part_ends: dict[tuple[str, str], int] = {}

    def setup(self) -> None:
        """Make the file ready for Ferry's reads and writes, once (`sqlite.opening`)."""
        if self.is_setup:
            return
        self.conn = prepared(self.conn, self.serde)
        self.is_setup = True

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor under the saver's lock, committed when closed if `transaction`.

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
        if (number := self._threads.get(thread_id)) is not None:
            return number
        cur.execute("SELECT id FROM ferry_threads WHERE thread_id = ?", (thread_id,))
        row = cur.fetchone()
        if row is None:
            return None
        self._threads[thread_id] = int(row[0])
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
                "SELECT s.thread, t.thread_id, s.ns, s.id, s.parent, s.type, s.value, s.metadata "
                "FROM ferry_steps AS s JOIN ferry_threads AS t ON t.id = s.thread "
                f"WHERE {' AND '.join(where)} ORDER BY s.id DESC",
                params,
            )
            rows = cur.fetchall()
        found = 0
        for number, thread_id, namespace, *step in rows:
            if limit is not None and found >= limit:
                return
            with naming_thread({"configurable": {"thread_id": thread_id}}):
                values = self._step_values(*step[2:])
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
        checkpoint, metadata = values or self._step_values(type_tag, value, metadata_text)
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

    def _step_values(
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
            isinstance(pair, list | tuple)
            and len(pair) == 2
            and isinstance(pair[0], dict)
            and isinstance(pair[1], dict)
        ):
            return pair[0], pair[1]
        raise StoredValueError("a stored checkpoint is not in Ferry's form")

    # -- writing ---------------------------------------------------------------------------

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
        stored = {k: v for k, v in checkpoint.items() if k != "id"}
        type_tag, value = self.serde.dumps_typed([stored, layout.stored_metadata(config, metadata)])
        parent = configurable.get("checkpoint_id")
        snapshot = int(UNBOUNDED_CHANNEL in checkpoint["channel_values"])
        saved: RunnableConfig = {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint["id"],
            }
        }
        key = (thread_id, namespace, checkpoint["id"])
        held = None
        if parent and UNBOUNDED_CHANNEL not in checkpoint["channel_values"]:
            held = self._held.fold((thread_id, namespace, parent), key)  # outside the lock
        with self.cursor() as cur:
            number = self._numbered(cur, thread_id)
            cur.execute(
                _PUT_STEP,
                (number, namespace, key_of(checkpoint["id"]), parent and key_of(parent), snapshot,
                 layout.code_of(type_tag), value),
            )  # fmt: skip
            self._held.put_here(key)
            # In the same transaction: one commit a step. It reads the new checkpoint's
            # history, which `fold` has normally just made.
            self.alongside_put(saved, checkpoint)
        if held is not None:  # after the commit: the file's write lock is not held meanwhile
            self._keep_parts(number, key, held)
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
            cur.execute(
                "INSERT INTO ferry_writes VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (*key, task_path, layout.packed(layout.merged([], new, replace))),
            )
            if cur.rowcount == 1:
                self._held.writes_put(_step_key(config), task_id, task_path, writes)
                return
            self._held.writes_unknown(_step_key(config))  # the file has the whole story
            cur.execute(
                "SELECT records FROM ferry_writes "
                "WHERE thread = ? AND ns = ? AND id = ? AND task = ?",
                key,
            )
            stored = layout.unpacked(cur.fetchone()[0])
            cur.execute(
                "UPDATE ferry_writes SET task_path = ?, records = ? "
                "WHERE thread = ? AND ns = ? AND id = ? AND task = ?",
                (task_path, layout.packed(layout.merged(stored, new, replace)), *key),
            )

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        with self.cursor() as cur:
            cur.execute(RECORD_START, (thread_id, tool_call_id))
            return bool(cur.rowcount == 1)

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        with self.cursor() as cur:
            cur.execute(FORGET_START, (thread_id, tool_call_id))

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The version after `current`, in the format of the thread it belongs to.

        Ferry's compact one (`graph.storage.sqlite.versions`), or LangGraph's for a thread another
        saver began.
        """
        if versions.is_langgraphs(current):
            return SqliteSaver.get_next_version(self, current, channel)  # type: ignore[arg-type]  # LangGraph's format, as its saver numbers it
        return versions.next_version(current)

    # -- threads ---------------------------------------------------------------------------

    def thread_ids(self) -> builtins.list[str]:
        """Ids of the stored threads."""
        with self.cursor(transaction=False) as cur:
            return [row[0] for row in cur.execute(THREADS_WITH_STEPS).fetchall()]

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and Ferry's rows, and forget its histories."""
        thread_id = str(thread_id)
        with self.cursor() as cur:
            number = self._thread_number(cur, thread_id)
            if number is not None:  # its number stays: another process may still hold it
                cur.execute("DELETE FROM ferry_steps WHERE thread = ?", (number,))
                cur.execute("DELETE FROM ferry_writes WHERE thread = ?", (number,))
                cur.execute("DELETE FROM ferry_parts WHERE thread = ?", (number,))
            for statement in DELETE_FERRY_ROWS:
                cur.execute(statement, (thread_id,))
        self._held.forget(thread_id)
        for thread in [k for k in self._part_ends if k[0] == thread_id]:
            del self._part_ends[thread]

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each thread's latest checkpoint per namespace, or (`delete`) nothing.

        `keep_latest` keeps everything that checkpoint needs: its history is stored into it
        first (`graph.storage.sqlite.retention`). This is what `langgraph.json`'s `checkpointer.ttl`
        and `ferry prune` run.
        """
        from graph.storage.sqlite.retention import prune_threads

        prune_threads(self, thread_ids, strategy=strategy)

    def namespaces(self, thread_id: str) -> builtins.list[str]:
        """The checkpoint namespaces a thread has checkpoints in."""
        with self.cursor(transaction=False) as cur:
            number = self._thread_number(cur, thread_id)
            if number is None:
                return []
            cur.execute("SELECT DISTINCT ns FROM ferry_steps WHERE thread = ?", (number,))
            return [row[0] for row in cur.fetchall()]

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
            _, metadata = self._step_values(*row[2:])
            stored = {k: v for k, v in oldest.items() if k != "id"}
            type_tag, value = self.serde.dumps_typed([stored, metadata])
            cur.execute(
                "UPDATE ferry_steps SET parent = NULL, snapshot = ?, type = ?, value = ?, "
                "metadata = NULL WHERE thread = ? AND ns = ? AND id = ?",
                (int(UNBOUNDED_CHANNEL in oldest["channel_values"]), layout.code_of(type_tag),
                 value, number, namespace, keys[-1]),
            )  # fmt: skip
            where = f"thread = ? AND ns = ? AND id NOT IN ({marks})"
            cur.execute(f"DELETE FROM ferry_steps WHERE {where}", (number, namespace, *keys))
            removed = int(cur.rowcount)
            cur.execute(f"DELETE FROM ferry_writes WHERE {where}", (number, namespace, *keys))
            parts.drop(cur, self.serde, number, namespace)
        self._part_ends.pop((thread_id, namespace), None)
        self._held.forget(thread_id, namespace, kept)
        return removed

    # -- the messages' history -------------------------------------------------------------

    def remembered_history(self, config: RunnableConfig) -> builtins.list[Any] | None:
        """The messages at the checkpoint `config` names, if this process holds them.

        The list is the one held: not to be changed.
        """
        return self._held.get(_step_key(config))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild `messages` from the nearest remembered (or snapshot) checkpoint onwards."""
        if list(channels) != [UNBOUNDED_CHANNEL]:
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
        if (known := self._held.get(key)) is not None:
            # A copy: the channel hands its value out (`get_state`), and a caller may edit it.
            return {"messages": {"writes": [], "seed": list(known)}}
        found: builtins.list[builtins.list[Any]] = []  # the remembered history the walk started at
        # The histories this process remembers on the thread, by stored key: the walk then
        # asks about each ancestor without spelling its id.
        known_keys = self._held.by_stored_key(key[:2])

        def remembered(step: Any) -> builtins.list[Any] | None:
            ancestor = known_keys.get(step)
            if ancestor is not None and (known := self._held.get(ancestor)) is not None:
                found.append(known)
                return known
            return None

        with self.cursor(transaction=False) as cur, collection_paused():
            number = self._thread_number(cur, thread_id)
            if number is None:
                return {"messages": {"writes": []}}
            replayed = history.replay(
                cur, self.serde, self._step_values, (number, namespace, key_of(target)), remembered
            )
        writes = [value for _, _, value in replayed["writes"]]
        seed = replayed.get("seed")
        # A remembered history was checked when it was remembered: only the new writes need it
        # (a walk over the whole history at every step would grow with the thread).
        checked = [] if found and found[-1] is seed else seed
        if any(isinstance(value, Overwrite) for value in writes) or not history.are_messages(
            checked, writes
        ):
            # An edit in Studio, or not Ferry's messages: LangGraph's reducer, with the task ids.
            replayed["writes"] = [(text_of(t), c, v) for t, c, v in replayed["writes"]]
            return {"messages": replayed}
        messages = fold_messages(snapshot_value(seed), writes)
        self._held.keep(key, messages)
        self._keep_parts(number, key, messages)
        return {"messages": {"writes": [], "seed": list(messages)}}

    def _keep_parts(self, number: int, key: history.Key, messages: builtins.list[Any]) -> None:
        """Store the history as a part once it has grown by `parts.PART` since the newest."""
        thread = key[:2]
        if (end := self._part_ends.get(thread)) is None:
            with self.cursor(transaction=False) as cur:
                cur.execute(
                    "SELECT coalesce(max(end), 0) FROM ferry_parts WHERE thread = ? AND ns = ?",
                    (number, thread[1]),
                )
                end = self._part_ends[thread] = int(cur.fetchone()[0])
        if len(messages) < end + parts.PART:
            return
        target = key_of(key[2])
        try:
            with self.cursor() as cur, collection_paused():
                self._begin_writing(cur)
                walk = history.ancestors(cur, number, thread[1], target)
                self._part_ends[thread] = parts.compact(
                    cur, self.serde, (number, thread[1]), target, messages, walk
                )
        except sqlite3.OperationalError as error:  # e.g. a read-only file: only speed is lost
            log.debug("history of %s not kept in parts: %s", thread[0], error)
            self._part_ends[thread] = len(messages)


def _step_key(config: RunnableConfig) -> history.Key:
    """(thread_id, checkpoint_ns, checkpoint_id) of the checkpoint `config` names."""
    configurable = config["configurable"]
    return (
        str(configurable["thread_id"]),
        configurable.get("checkpoint_ns", ""),
        str(configurable["checkpoint_id"]),
    )
