"""Threads in PostgreSQL (`FERRY_DATABASE_URL`), for the CLI, Python and the server alike.

LangGraph's Postgres savers with Ferry's serializer and its channel versions everywhere, so a
thread started by any entry point continues in any other. As in SQLite, a saved history per
thread spares a new process the replay from the thread's start (`postgres.kept`), and a summary
row per thread spares `ferry threads` every replay (`postgres.summaries`).
"""

from __future__ import annotations

import asyncio
import atexit
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any, NoReturn

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from graph.core.settings import ConfigError
from graph.storage.codec.allowlist import NamesThreadOnRefusal
from graph.storage.codec.serde import serializer
from graph.storage.errors import NotSupportedByDatabase
from graph.storage.history.folding import Fold
from graph.storage.history.messages import History
from graph.storage.internals import postgres_cursor, postgres_select_sql, saver_loop
from graph.storage.leases.sqlite import LeaseStore
from graph.storage.postgres import layout_versions, runs, summaries
from graph.storage.postgres.tables import (
    DELETE_FERRY_ROWS,
    FORGET_START,
    RECORD_START,
    STORED_BYTES,
    THREAD_IDS,
)
from graph.storage.threads import reading as stored_threads
from graph.storage.threads.started import on_its_loop
from graph.storage.threads.summaries import Row

try:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from graph.storage.leases.postgres import postgres_leases
    from graph.storage.postgres.kept import KeptHistories, amessages_history, messages_history
except ImportError as exc:  # the optional extra is not installed
    raise ConfigError(
        "FERRY_DATABASE_URL needs Postgres support: pip install 'ferry-agent[postgres]'"
    ) from exc

# What LangGraph's Postgres savers expect of a connection: each statement commits on its own
# (setup creates indexes CONCURRENTLY), rows come as dicts, and no server-side prepared
# statements, which poolers such as PgBouncer do not carry between connections.
_CONNECTION = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
_CONNECT_TIMEOUT_S = 10
Connection = psycopg.Connection[DictRow] | ConnectionPool[psycopg.Connection[DictRow]]
"""What a sync saver runs on: one connection, or a pool of them."""
# Several processes may start on a new database at once; its tables are created by one of them.
_SETUP_LOCK = 0x6665_7272  # "ferr"
_SETUP_WAIT_S = 60


def connect(url: str) -> psycopg.Connection[DictRow]:
    """Open one connection for the savers; a failure is one line naming the setting."""
    try:
        return psycopg.Connection.connect(
            url,
            connect_timeout=_CONNECT_TIMEOUT_S,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
        )
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0].removeprefix("connection failed: ")
        raise ConfigError(f"cannot connect to Postgres (FERRY_DATABASE_URL): {reason}") from exc


class FerryPostgresSaver(NamesThreadOnRefusal, PostgresSaver):
    """LangGraph's Postgres saver with Ferry's serializer, rows and kept histories.

    The messages are rebuilt from the nearest known history (`postgres.kept`), and each put on
    a thread's main namespace rewrites its summary row (`postgres.summaries`). A `FerryStore`
    (`graph.storage.ferry_store`): the loop and the CLI rely on it as one.
    """

    SELECT_SQL = postgres_select_sql()  # each blob found by its key (`internals`)
    fold: Fold | None = None  # the `messages` reducer, handed in (`history.folding`)

    def __init__(self, conn: Connection, *, fold: Fold | None = None) -> None:
        super().__init__(conn, serde=serializer())
        self.fold = fold
        self.kept = KeptHistories(lambda: self.serde, lambda: self.fold)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> History:
        """Rebuild `messages` from the nearest kept, saved or snapshot checkpoint onwards."""
        if list(channels) != ["messages"]:
            return dict(super().get_delta_channel_history(config=config, channels=channels))
        return messages_history(self, config)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint, then its thread's summary row (for the main namespace)."""
        saved = super().put(config, checkpoint, metadata, new_versions)
        summaries.after_put(self, saved, checkpoint)
        return saved

    def thread_summaries(self) -> list[tuple[Any, ...]]:
        """Each thread's listing row (`graph.storage.threads.summaries.LISTING`)."""
        return summaries.listing(self)

    def save_summary(self, row: Row) -> None:
        """Write a thread's summary row; nothing if the database may not be written."""
        summaries.save(self, row)

    def setup(self) -> None:
        """Create or migrate LangGraph's tables, and Ferry's."""
        super().setup()
        with postgres_cursor(self) as cur:
            layout_versions.migrate(cur)  # Ferry's tables at its layout version; newer refused

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        with postgres_cursor(self) as cur:
            cur.execute(RECORD_START, (thread_id, tool_call_id))
            return bool(cur.rowcount == 1)

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        with postgres_cursor(self) as cur:
            cur.execute(FORGET_START, (thread_id, tool_call_id))

    def thread_ids(self) -> list[str]:
        """Ids of the stored threads."""
        with postgres_cursor(self) as cur:
            cur.execute(THREAD_IDS)
            return [row["thread_id"] for row in cur.fetchall()]

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes, and Ferry's rows and histories of it."""
        super().delete_thread(thread_id)
        with postgres_cursor(self) as cur:
            for statement in DELETE_FERRY_ROWS:
                cur.execute(statement, (str(thread_id),))
        self.kept.forget(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, and what they left on the thread.

        The server's `multitask_strategy="rollback"` runs it (`graph.storage.postgres.runs`).
        """
        wanted = [str(run_id) for run_id in run_ids]
        if not wanted:
            return
        with postgres_cursor(self) as cur, cur.connection.transaction():
            cur.execute(runs.DELETE_CHECKPOINTS, (wanted,))
            deleted = cur.fetchall()
            for statement, params in runs.follow_ups(deleted):
                cur.execute(statement, params)
        for thread_id in runs.threads_of(deleted):
            self.kept.forget(thread_id)

    def stored_bytes(self) -> int:
        """Disk space the threads take: Ferry's tables with their indexes and TOAST data."""
        with postgres_cursor(self) as cur:
            cur.execute(STORED_BYTES)
            row = cur.fetchone()
            return int(row["size"]) if row else 0

    def compact(self) -> None:
        """Nothing: Postgres reuses the space of deleted rows in place."""

    def prune_checkpoints(self, thread_ids: Sequence[str], *, keep: int) -> int:
        """Refused: Ferry prunes a thread's older checkpoints in SQLite only."""
        refuse_pruning_checkpoints()

    def threads_updated_before(self, cutoff: datetime) -> list[str]:
        """Ids of the threads whose last checkpoint is older than `cutoff` (timezone-aware)."""
        return stored_threads.threads_updated_before(self, cutoff)

    def leases(self, timeout_s: float, *, holder: str) -> LeaseStore | None:
        """Advisory locks on the database, on connections of their own (`leases.postgres`)."""
        return postgres_leases(self, timeout_s)


def refuse_pruning_checkpoints() -> NoReturn:
    """Say that Postgres keeps a thread's checkpoints whole, and what to use instead."""
    raise NotSupportedByDatabase(
        "prune --keep works on SQLite only; with FERRY_DATABASE_URL use --before DATE"
    )


def stored_thread_ids(url: str) -> set[str]:
    """Ids of the threads stored at `url`; none while its tables do not exist."""
    with connect(url) as conn:
        row = conn.execute("SELECT to_regclass('checkpoints') IS NOT NULL AS ready").fetchone()
        if not (row and row["ready"]):
            return set()
        return set(FerryPostgresSaver(conn).thread_ids())


def _set_up(conn: psycopg.Connection[DictRow]) -> None:
    """Create or migrate the threads' tables, one process at a time."""
    one_at_a_time(conn, FerryPostgresSaver(conn).setup)


def one_at_a_time(conn: psycopg.Connection[DictRow], setup: Callable[[], None]) -> None:
    """Run `setup` while no other process sets up this database (threads' or memories' tables).

    LangGraph's setups read the migration they are at, then apply the next ones: two processes
    on a new database would both apply the first, and the second fails on its version's key.
    """
    # Not `pg_advisory_lock`: a session waiting inside it holds a transaction open, which the
    # holder's CREATE INDEX CONCURRENTLY waits for in turn, a deadlock. Polling holds none.
    deadline = time.monotonic() + _SETUP_WAIT_S
    while not _locked(conn):
        if time.monotonic() > deadline:
            raise ConfigError("Postgres (FERRY_DATABASE_URL): another process is still setting up")
        time.sleep(0.05)
    try:
        setup()
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))


def _locked(conn: psycopg.Connection[DictRow]) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s) AS locked", (_SETUP_LOCK,)).fetchone()
    return bool(row and row["locked"])


def postgres_setup(url: str) -> None:
    """Create or migrate the tables at `url`; fail with one clear line if it cannot be reached."""
    with connect(url) as conn:
        _set_up(conn)


@contextmanager
def open_postgres_saver(url: str, *, fold: Fold | None = None) -> Iterator[FerryPostgresSaver]:
    """A saver on one connection for the length of a command, closed afterwards.

    `fold` is the `messages` reducer (`graph.storage.history.folding`), as for every saver.
    """
    conn = connect(url)
    saver = FerryPostgresSaver(conn, fold=fold)
    try:
        _set_up(conn)
        yield saver
    finally:
        # A run that failed may still be saving a checkpoint from a worker thread: let it finish.
        with saver.lock:
            conn.close()


class AsyncFerryPostgresSaver(NamesThreadOnRefusal, AsyncPostgresSaver):
    """LangGraph's async Postgres saver, for the server; a refused value names its thread.

    It rebuilds histories as the sync one does; its threads' summary rows are left to the next
    listing. A `FerryStore` for the runs it serves (started calls, leases); the upkeep of
    stored threads is a command's (`ferry prune`, on the sync saver).
    """

    SELECT_SQL = FerryPostgresSaver.SELECT_SQL
    fold: Fold | None = None

    def __init__(self, conn: Any, *, serde: Any = None, fold: Fold | None = None) -> None:
        super().__init__(conn, serde=serde or serializer())
        self.fold = fold
        self.kept = KeptHistories(lambda: self.serde, lambda: self.fold)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> History:
        """Rebuild `messages` from the nearest kept, saved or snapshot checkpoint onwards."""
        if list(channels) != ["messages"]:
            found = await super().aget_delta_channel_history(config=config, channels=channels)
            return dict(found)
        return await amessages_history(self, config)

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting (from a worker thread, on the saver's loop)."""
        return bool(on_its_loop(saver_loop(self), self.afirst_start(thread_id, tool_call_id)))

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start (from a worker thread, on the saver's loop)."""
        on_its_loop(saver_loop(self), self.aforget_start(thread_id, tool_call_id))

    async def afirst_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        async with postgres_cursor(self) as cur:
            await cur.execute(RECORD_START, (thread_id, tool_call_id))
            return bool(cur.rowcount == 1)

    async def aforget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        async with postgres_cursor(self) as cur:
            await cur.execute(FORGET_START, (thread_id, tool_call_id))

    def leases(self, timeout_s: float, *, holder: str) -> LeaseStore | None:
        """Advisory locks on the database, on connections of their own (`leases.postgres`)."""
        return postgres_leases(self, timeout_s)

    def stored_bytes(self) -> int:
        """Disk space the threads take (from a worker thread, on the saver's loop)."""
        return int(on_its_loop(saver_loop(self), self._astored_bytes()))

    async def _astored_bytes(self) -> int:
        async with postgres_cursor(self) as cur:
            await cur.execute(STORED_BYTES)
            row = await cur.fetchone()
            return int(row["size"]) if row else 0

    def compact(self) -> None:
        """Nothing: Postgres reuses the space of deleted rows in place."""

    def prune_checkpoints(self, thread_ids: Sequence[str], *, keep: int) -> int:
        """Refused, as by the sync saver."""
        refuse_pruning_checkpoints()

    def threads_updated_before(self, cutoff: datetime) -> list[str]:
        """Refused: listing threads is a command's work, on the sync saver (`ferry prune`)."""
        raise NotSupportedByDatabase(
            "the server's Postgres saver does not list threads; use `ferry prune --before DATE`"
        )

    async def setup(self) -> None:
        """Create or migrate LangGraph's tables, and Ferry's."""
        await super().setup()
        async with postgres_cursor(self) as cur:
            await layout_versions.amigrate(cur)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread (from Studio, say) with Ferry's rows and histories of it."""
        await super().adelete_thread(thread_id)
        async with postgres_cursor(self) as cur:
            for statement in DELETE_FERRY_ROWS:
                await cur.execute(statement, (str(thread_id),))
        self.kept.forget(str(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, and what they left on the thread.

        The server's `multitask_strategy="rollback"` runs it (`graph.storage.postgres.runs`).
        """
        wanted = [str(run_id) for run_id in run_ids]
        if not wanted:
            return
        async with postgres_cursor(self) as cur, cur.connection.transaction():
            await cur.execute(runs.DELETE_CHECKPOINTS, (wanted,))
            deleted = await cur.fetchall()
            for statement, params in runs.follow_ups(deleted):
                await cur.execute(statement, params)
        for thread_id in runs.threads_of(deleted):
            self.kept.forget(thread_id)


def postgres_saver(url: str, *, fold: Fold | None = None) -> FerryPostgresSaver:
    """A saver on a connection pool that lives as long as the process and replaces lost links."""
    postgres_setup(url)
    pool = ConnectionPool(
        url,
        connection_class=psycopg.Connection[DictRow],
        kwargs=_CONNECTION,
        min_size=1,
        max_size=1,  # the saver runs one statement at a time anyway
        check=ConnectionPool.check_connection,
        name="ferry",
        open=True,
    )
    atexit.register(pool.close)
    return FerryPostgresSaver(pool, fold=fold)


@asynccontextmanager
async def async_postgres_saver(
    url: str, *, fold: Fold | None = None, serde: Any = None
) -> AsyncIterator[AsyncFerryPostgresSaver]:
    """The server's saver, on a connection pool open for the server's lifetime."""
    await asyncio.to_thread(postgres_setup, url)
    async with AsyncConnectionPool(
        url,
        connection_class=psycopg.AsyncConnection[DictRow],
        kwargs=_CONNECTION,
        min_size=1,
        max_size=1,
        check=AsyncConnectionPool.check_connection,
        name="ferry-server",
        open=False,  # opened by `async with`
    ) as pool:
        yield AsyncFerryPostgresSaver(pool, serde=serde or serializer(), fold=fold)
