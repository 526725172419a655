"""Ferry's SQLite saver: one file (WAL, busy timeout) shared by the CLI, Python and the server.

Checkpoints and writes live in Ferry's own tables (`graph.storage.sqlite.layout`). Messages are
stored as the writes of each step, so a thread's file grows with its conversation, not with
its square. `FerrySaver` is the interface LangGraph calls; what each call does is in one module
per concern: the file (`sqlite.file`), reads (`sqlite.reading`), writes (`sqlite.writing`), the
messages' history (`sqlite.histories`), whole threads (`sqlite.maintenance`, `sqlite.retention`)
and summary rows (`sqlite.summaries`). The async methods run the sync ones in worker threads
(`sqlite.in_threads`).
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from graph.storage.codec.allowlist import naming_thread
from graph.storage.codec.serde import FerrySerializer, serializer
from graph.storage.history.folding import Fold
from graph.storage.history.held import Histories, StepsPutHere
from graph.storage.internals import DeltaChannelHistory, stock_next_version
from graph.storage.sqlite import (
    histories,
    maintenance,
    reading,
    retention,
    runs,
    summaries,
    versions,
    writing,
)
from graph.storage.sqlite.file import SqliteFile, connect, open_file, read_only
from graph.storage.sqlite.in_threads import AsyncInThreads
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL
from graph.storage.sqlite.maintenance import THREADS_WITH_STEPS
from graph.storage.threads import reading as stored_threads
from graph.storage.threads.summaries import Row

if TYPE_CHECKING:
    from graph.storage.leases.sqlite import LeaseStore

__all__ = ["THREADS_WITH_STEPS", "FerrySaver", "connect", "open_file"]


class FerrySaver(AsyncInThreads):
    """A SQLite saver in Ferry's layout that keeps the histories it rebuilt, in memory.

    `fold` is the `messages` reducer (`graph.storage.history.folding`), handed in by whoever
    opens the saver; without one, LangGraph folds the writes with the graph's. A `FerryStore`
    (`graph.storage.ferry_store`): the loop and the CLI rely on it as one.
    """

    fold: Fold | None = None

    def __init__(
        self,
        conn: sqlite3.Connection,
        serde: FerrySerializer | None = None,
        *,
        fold: Fold | None = None,
    ) -> None:
        super().__init__(serde=serde or serializer())
        self.file = SqliteFile(conn)
        self.fold = fold
        self.histories = Histories()
        self.steps = StepsPutHere(self.histories)
        # Per (thread, namespace): the length of the history at the newest part known here.
        self.part_ends: dict[tuple[str, str], int] = {}

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection (after `setup`, a copy in memory for a read-only file of old rows)."""
        return self.file.conn

    @property
    def lock(self) -> threading.Lock:
        """The lock every cursor takes (shared with a stock saver's, `sqlite.stock`)."""
        return self.file.lock

    @lock.setter
    def lock(self, lock: threading.Lock) -> None:
        self.file.lock = lock

    @property
    def is_setup(self) -> bool:
        """Whether the file is ready for Ferry's reads and writes."""
        return self.file.is_setup

    def setup(self) -> None:
        """Make the file ready for Ferry's reads and writes, once (`sqlite.opening`)."""
        self.file.setup(self.serde)

    def close(self) -> None:
        """Close the connection, once a save in progress is done.

        A run that failed may still be saving a checkpoint from a worker thread; closing the
        connection under its feet crashes SQLite, so this waits for the saver's lock first.
        """
        with self.lock:
            self.conn.close()

    def cursor(self, transaction: bool = True) -> AbstractContextManager[sqlite3.Cursor]:
        """A cursor under the saver's lock, committed when closed if `transaction`.

        Inside one this thread already holds, a cursor in the same transaction.
        """
        return self.file.cursor(self.serde, transaction)

    # -- reading ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names, or its thread's newest, with its pending writes."""
        return reading.get_tuple(self, config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - the saver interface's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The matching checkpoints, newest first (by id, as LangGraph's savers order them)."""
        return reading.list_checkpoints(self, config, filter=filter, before=before, limit=limit)

    def step_values(
        self, stored_type: Any, value: bytes, metadata_text: str | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A stored step's checkpoint and metadata."""
        return reading.step_values(self, stored_type, value, metadata_text)

    # -- writing ---------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint, and with it the thread's summary row."""
        return writing.put(self, config, checkpoint, metadata)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes at a checkpoint, as LangGraph's savers would."""
        writing.put_writes(self, config, writes, task_id, task_path)

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        return writing.first_start(self, thread_id, tool_call_id)

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        writing.forget_start(self, thread_id, tool_call_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The version after `current`, in the format of the thread it belongs to.

        Ferry's compact one (`graph.storage.sqlite.versions`), or LangGraph's for a thread another
        saver began.
        """
        if versions.is_langgraphs(current):
            return stock_next_version(current)
        return versions.next_version(current)

    # -- threads ---------------------------------------------------------------------------

    def thread_ids(self) -> builtins.list[str]:
        """Ids of the stored threads."""
        return maintenance.thread_ids(self)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and Ferry's rows, and forget its histories."""
        maintenance.delete_thread(self, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, and what they left on the thread.

        The server's `multitask_strategy="rollback"` runs it (`graph.storage.sqlite.runs`).
        """
        runs.delete_for_runs(self, run_ids)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each thread's latest checkpoint per namespace, or (`delete`) nothing.

        `keep_latest` keeps everything that checkpoint needs: its history is stored into it
        first (`graph.storage.sqlite.retention`). This is what `langgraph.json`'s
        `checkpointer.ttl` and `ferry prune` run.
        """
        retention.prune_threads(self, thread_ids, strategy=strategy)

    def prune_checkpoints(self, thread_ids: Sequence[str], *, keep: int) -> int:
        """Keep the newest `keep` checkpoints of each thread; return how many went."""
        return sum(retention.prune_thread(self, thread_id, keep) for thread_id in thread_ids)

    def threads_updated_before(self, cutoff: datetime) -> builtins.list[str]:
        """Ids of the threads whose last checkpoint is older than `cutoff` (timezone-aware)."""
        return stored_threads.threads_updated_before(self, cutoff)

    def stored_bytes(self) -> int:
        """Disk space the threads take: the file and its write-ahead log; 0 in memory."""
        return retention.stored_bytes(self.file.path)

    def compact(self) -> None:
        """Give freed space back to the file system (`VACUUM`)."""
        retention.compact(self)

    def leases(self, timeout_s: float, *, holder: str) -> LeaseStore | None:
        """Leases in the file's `ferry_leases` table; None in memory or for a read-only file."""
        from graph.storage.leases.sqlite import SqliteLeases  # only runs take leases, not reads

        path = self.file.path
        # A read-only file is never continued: a lease would write it (root may, by mode).
        if path is None or read_only(path):
            return None
        return SqliteLeases(path, timeout_s, holder=holder)

    def namespaces(self, thread_id: str) -> builtins.list[str]:
        """The checkpoint namespaces a thread has checkpoints in."""
        return maintenance.namespaces(self, thread_id)

    def keep_only(self, config: RunnableConfig, kept: Sequence[str], oldest: dict[str, Any]) -> int:
        """Delete a namespace's checkpoints but `kept`; the oldest kept becomes `oldest`, a root.

        Returns how many checkpoints went.
        """
        return maintenance.keep_only(self, config, kept, oldest)

    def thread_summaries(self) -> builtins.list[tuple[Any, ...]]:
        """Each thread's listing row (`graph.storage.threads.summaries.LISTING_SQLITE`)."""
        return summaries.listing(self)

    def save_summary(self, row: Row) -> None:
        """Write a thread's summary row; nothing if the file may not be written."""
        summaries.save(self, row)

    # -- the messages' history -------------------------------------------------------------

    def remembered_history(self, config: RunnableConfig) -> builtins.list[Any] | None:
        """The messages at the checkpoint `config` names, if this process holds them.

        The list is the one held: not to be changed.
        """
        return self.histories.get(writing.step_key(config))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Rebuild `messages` from the nearest remembered (or snapshot) checkpoint onwards."""
        with naming_thread(config):
            if list(channels) != [UNBOUNDED_CHANNEL]:
                return super().get_delta_channel_history(config=config, channels=channels)
            return histories.messages_history(self, config)
