"""Threads in PostgreSQL (`FERRY_DATABASE_URL`), for the CLI, Python and the server alike.

LangGraph's Postgres savers with Ferry's serializer and its channel versions everywhere, so a
thread started by any entry point continues in any other. This file holds the SQL Ferry runs
beside LangGraph's and both savers: `FerryPostgresSaver` (the CLI's, Python's, the worker's) and
`AsyncFerryPostgresSaver` (the server's), each a thin driver of the same statements, as
LangGraph's `PostgresSaver` and `AsyncPostgresSaver` are of `BasePostgresSaver`. As in SQLite, a
stored history per thread spares a new process the replay from the thread's start
(`postgres.stored_histories`, the one piece of algorithm, shared by both), and a summary row per
thread spares `ferry threads` every replay (`graph.storage.threads.summaries`). Tables of an
older layout are brought up to date by `postgres.layout_versions`, imported only then.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from typing import Any, NoReturn, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from graph.core.settings import ConfigError
from graph.storage.codec.reads import NamesThreadOnRefusal, naming_thread
from graph.storage.codec.serde import collection_paused, serializer
from graph.storage.errors import DatabaseError, NotSupportedByDatabase
from graph.storage.history.folding import Fold
from graph.storage.history.messages import History, latest_key, named_key, no_messages
from graph.storage.internals import (
    postgres_cursor,
    postgres_select_sql,
    run_writes_on_start,
    saver_loop,
)
from graph.storage.leases.sqlite import LeaseStore
from graph.storage.postgres.stored_histories import PostgresHistories, Steps, T
from graph.storage.threads import reading as stored_threads
from graph.storage.threads.started import on_its_loop
from graph.storage.threads.summaries import (
    DELETE_POSTGRES,
    LISTING,
    SAVE_POSTGRES,
    Row,
    listing_rows,
)

try:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from graph.storage.leases.postgres import postgres_leases
except ImportError as exc:  # the optional extra is not installed
    raise ConfigError(
        "FERRY_DATABASE_URL needs Postgres support: pip install 'ferry-agent[postgres]'"
    ) from exc

log = logging.getLogger("ferry.saver")

# -- the statements ----------------------------------------------------------------------------

RECORD_START = "INSERT INTO ferry_started_calls VALUES (%s, %s) ON CONFLICT DO NOTHING"
"""Record a tool call as started (nothing if it already was)."""
FORGET_START = "DELETE FROM ferry_started_calls WHERE thread_id = %s AND tool_call_id = %s"
"""Forget that a call started: it paused in `interrupt()`, and runs again when resumed."""
THREAD_IDS = "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = ''"
"""Ids of the threads with checkpoints on their main namespace."""
TABLES = (
    *("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
    *("ferry_started_calls", "ferry_histories", "ferry_history_parts", "ferry_thread_summaries"),
)
"""LangGraph's tables and Ferry's: what the threads take on disk."""
STORED_BYTES = (
    "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) AS size FROM unnest(ARRAY["
    + ", ".join(f"'{table}'" for table in TABLES)
    + "]::text[]) AS t"
)
"""Disk space the tables take, with their indexes and TOAST data."""
DELETE_FERRY_ROWS = (
    "DELETE FROM ferry_started_calls WHERE thread_id = %s",
    "DELETE FROM ferry_histories WHERE thread_id = %s",
    "DELETE FROM ferry_history_parts WHERE thread_id = %s",
    DELETE_POSTGRES,
)
"""Ferry's own rows of a thread, deleted with its checkpoints."""

LAYOUT_VERSION = 1
"""The layout version of Ferry's tables this Ferry writes (`layout_versions.MIGRATIONS`' length).

As LangGraph records its migrations in `checkpoint_migrations`, Ferry records its in
`ferry_migrations`, one row per version reached (graph/storage/FORMAT.md, "Layout versions")."""
MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS ferry_migrations (v INTEGER PRIMARY KEY)"
# Other processes' setups wait here for the version read to stay true until the commit.
_LOCK_MIGRATIONS = "LOCK TABLE ferry_migrations IN EXCLUSIVE MODE"
_VERSION_REACHED = "SELECT coalesce(max(v), 0) AS v FROM ferry_migrations"

# Deleting a run's checkpoints, as the server's `multitask_strategy="rollback"` does. LangGraph's
# `checkpoints` table holds each checkpoint's metadata as JSON, so a run's checkpoints are found
# by one statement. What the run left on the thread goes with them, as in SQLite
# (`graph.storage.sqlite.saver`): its writes, the blobs only its checkpoints name, the question or
# resume value it stored on the checkpoint it started from, and Ferry's stored histories and
# summary row of its checkpoints (caches, rebuilt on the next read). Tool calls it started stay
# recorded as started: their side effects happened.
DELETE_CHECKPOINTS = (
    "DELETE FROM checkpoints WHERE metadata ->> 'run_id' = ANY(%s::text[]) "
    "RETURNING thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "checkpoint -> 'channel_versions' AS versions"
)
_THREAD = "thread_id = %(thread)s AND checkpoint_ns = %(ns)s"
_RUN_WRITES = f"DELETE FROM checkpoint_writes WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)"
# Writes on the checkpoint a deleted run started from, unless another run went on from it.
_RUN_START_WRITES = (
    f"DELETE FROM checkpoint_writes WHERE {_THREAD} AND checkpoint_id = %(parent)s "
    "AND task_id = ANY(%(tasks)s) AND NOT EXISTS (SELECT 1 FROM checkpoints c "
    "WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s "
    "AND c.parent_checkpoint_id = %(parent)s)"
)
# A blob is a channel's value at a version; checkpoints that stay may name the same one.
_RUN_BLOBS = (
    f"DELETE FROM checkpoint_blobs b WHERE {_THREAD} AND (b.channel, b.version) IN "
    "(SELECT * FROM unnest(%(channels)s::text[], %(versions)s::text[])) AND NOT EXISTS "
    "(SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
    "AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel "
    "= b.version)"
)
# A stored history at a deleted checkpoint goes, and every part after it (a part continues
# the one before).
_RUN_HISTORY_PARTS = (
    f"DELETE FROM ferry_history_parts WHERE {_THREAD} AND (messages >= (SELECT min(messages) "
    f"FROM ferry_history_parts WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)) "
    f"OR EXISTS (SELECT 1 FROM ferry_histories WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)))"
)
_RUN_HISTORY = f"DELETE FROM ferry_histories WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)"
_RUN_SUMMARY = (
    "DELETE FROM ferry_thread_summaries WHERE thread_id = %(thread)s "
    "AND checkpoint_id = ANY(%(gone)s)"
)


def run_follow_ups(deleted: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The statements that delete what the checkpoints `deleted` (`DELETE_CHECKPOINTS`) left."""
    by_thread: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in deleted:
        by_thread[(row["thread_id"], row["checkpoint_ns"])].append(row)
    for (thread, ns), rows in by_thread.items():
        gone = [row["checkpoint_id"] for row in rows]
        at = {"thread": thread, "ns": ns, "gone": gone}
        yield _RUN_WRITES, at
        for parent in {r["parent_checkpoint_id"] for r in rows} - {None, *gone}:
            yield _RUN_START_WRITES, {**at, "parent": parent, "tasks": run_writes_on_start(parent)}
        named = {(c, v) for r in rows for c, v in (r["versions"] or {}).items()}
        channels, versions = [c for c, _ in named], [str(v) for _, v in named]
        yield _RUN_BLOBS, {**at, "channels": channels, "versions": versions}
        yield _RUN_HISTORY_PARTS, at
        yield _RUN_HISTORY, at
        if not ns:
            yield _RUN_SUMMARY, at


def _threads_of(deleted: Sequence[Mapping[str, Any]]) -> set[str]:
    """The threads the deleted checkpoints were on."""
    return {row["thread_id"] for row in deleted}


def _refuse_newer(version: int, info: Any) -> None:
    """Refuse, naming the database, tables of a layout newer than this Ferry knows."""
    if version > LAYOUT_VERSION:
        where = f"postgres {info.host}:{info.port}/{info.dbname}"
        raise DatabaseError(
            f"database {where} (FERRY_DATABASE_URL): Ferry's tables are at layout version "
            f"{version}, made by a newer Ferry; upgrade Ferry (this one knows versions up to "
            f"{LAYOUT_VERSION})"
        )


# -- connections -------------------------------------------------------------------------------

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


# -- running the stored histories' steps on a cursor -----------------------------------------


def _step(steps: Steps[T], answer: Any) -> tuple[Any, Any]:
    """The steps' next query, or (None, what they returned); rebuilding pauses the collector."""
    with collection_paused():
        try:
            return steps.send(answer), None
        except StopIteration as done:
            return None, done.value


def drive(cur: psycopg.Cursor[Any], steps: Steps[T]) -> T:
    """Run the steps' queries on `cur`; rebuilding messages pauses the collector (see serde)."""
    answer: Any = None
    while True:
        query, returned = _step(steps, answer)
        if query is None:
            return cast(T, returned)
        cur.execute(query.sql, query.params)
        if query.want == "count":
            answer = cur.rowcount
        else:
            answer = cur.fetchone() if query.want == "one" else cur.fetchall()


async def adrive(cur: psycopg.AsyncCursor[Any], steps: Steps[T]) -> T:
    """`drive`, awaited; the collector runs while the queries are awaited."""
    answer: Any = None
    while True:
        query, returned = _step(steps, answer)
        if query is None:
            return cast(T, returned)
        await cur.execute(query.sql, query.params)
        if query.want == "count":
            answer = cur.rowcount
        else:
            answer = await (cur.fetchone() if query.want == "one" else cur.fetchall())


# -- the sync saver ----------------------------------------------------------------------------


class FerryPostgresSaver(NamesThreadOnRefusal, PostgresSaver):
    """LangGraph's Postgres saver with Ferry's serializer, rows and stored histories.

    The messages are rebuilt from the nearest known history (`postgres.stored_histories`), and
    each put on a thread's main namespace rewrites its summary row. A `FerryStore`
    (`graph.storage.ferry_store`): the loop and the CLI rely on it as one.
    """

    SELECT_SQL = postgres_select_sql()  # each blob found by its key (`internals`)
    fold: Fold | None = None  # the `messages` reducer, handed in (`history.folding`)

    def __init__(self, conn: Connection, *, fold: Fold | None = None) -> None:
        super().__init__(conn, serde=serializer())
        self.fold = fold
        self.histories = PostgresHistories(lambda: self.serde, lambda: self.fold)

    def setup(self) -> None:
        """Create or migrate LangGraph's tables, and Ferry's; a newer layout is refused."""
        super().setup()
        with postgres_cursor(self) as cur:
            cur.execute(MIGRATIONS_TABLE)
            with cur.connection.transaction():
                cur.execute(_LOCK_MIGRATIONS)
                version = cur.execute(_VERSION_REACHED).fetchone()["v"]
                _refuse_newer(version, cur.connection.info)
                if version < LAYOUT_VERSION:
                    from graph.storage.postgres import layout_versions

                    layout_versions.migrate(cur, version)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> History:
        """Rebuild `messages` from the nearest cached, stored or snapshot checkpoint onwards."""
        if list(channels) != ["messages"]:
            return dict(super().get_delta_channel_history(config=config, channels=channels))
        histories = self.histories
        with naming_thread(config):
            key = named_key(config) or latest_key(self.get_tuple(config))
            if key is None:
                return no_messages()
            if (cached := histories.cached_at(key)) is not None:
                return cached
            with postgres_cursor(self) as cur:
                history, steps = histories.rebuilt(key, drive(cur, histories.rebuild(key)))
            if steps is not None:
                try:  # in one transaction; a failure (a read-only role) loses only speed
                    with postgres_cursor(self) as cur, cur.connection.transaction():
                        histories.stored.know(key[:2], drive(cur, steps))
                except psycopg.Error as error:
                    log.debug("history of %s not stored: %s", key[0], error)
            return history

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint, then its thread's summary row (for the main namespace)."""
        saved = super().put(config, checkpoint, metadata, new_versions)
        if (row := stored_threads.summary_after_put(self, saved, checkpoint)) is not None:
            self.store_summary(row)
        return saved

    def thread_summaries(self) -> list[tuple[Any, ...]]:
        """Each thread's listing row (`graph.storage.threads.summaries.LISTING`)."""
        with postgres_cursor(self) as cur:
            return listing_rows(cur)

    def store_summary(self, row: Row) -> None:
        """Write a thread's summary row; nothing if the database may not be written."""
        try:
            with postgres_cursor(self) as cur:
                cur.execute(SAVE_POSTGRES, row)
        except psycopg.Error as error:
            log.debug("summary of %s not stored: %s", row[0], error)

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
        self.histories.forget(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, and what they left on the thread.

        The server's `multitask_strategy="rollback"` runs it (`run_follow_ups`).
        """
        wanted = [str(run_id) for run_id in run_ids]
        if not wanted:
            return
        with postgres_cursor(self) as cur, cur.connection.transaction():
            cur.execute(DELETE_CHECKPOINTS, (wanted,))
            deleted = cur.fetchall()
            for statement, params in run_follow_ups(deleted):
                cur.execute(statement, params)
        for thread_id in _threads_of(deleted):
            self.histories.forget(thread_id)

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


# -- the async saver, the server's -------------------------------------------------------------


class AsyncFerryPostgresSaver(NamesThreadOnRefusal, AsyncPostgresSaver):
    """LangGraph's async Postgres saver, for the server; a refused value names its thread.

    It rebuilds histories as the sync one does. Its puts leave the threads' summary rows to the
    next listing, which it reads and stores as the sync one does. A `FerryStore`: its sync
    methods (started calls, thread summaries, stored bytes) run its async ones on its loop, from
    a worker thread (a sync node's, or a command's); the loop itself must await those.
    """

    SELECT_SQL = FerryPostgresSaver.SELECT_SQL
    fold: Fold | None = None

    def __init__(self, conn: Any, *, serde: Any = None, fold: Fold | None = None) -> None:
        super().__init__(conn, serde=serde or serializer())
        self.fold = fold
        self.histories = PostgresHistories(lambda: self.serde, lambda: self.fold)

    async def setup(self) -> None:
        """Create or migrate LangGraph's tables, and Ferry's; a newer layout is refused."""
        await super().setup()
        async with postgres_cursor(self) as cur:
            await cur.execute(MIGRATIONS_TABLE)
            async with cur.connection.transaction():
                await cur.execute(_LOCK_MIGRATIONS)
                version = (await (await cur.execute(_VERSION_REACHED)).fetchone())["v"]
                _refuse_newer(version, cur.connection.info)
                if version < LAYOUT_VERSION:
                    from graph.storage.postgres import layout_versions

                    await layout_versions.amigrate(cur, version)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> History:
        """Rebuild `messages` from the nearest cached, stored or snapshot checkpoint onwards."""
        if list(channels) != ["messages"]:
            found = await super().aget_delta_channel_history(config=config, channels=channels)
            return dict(found)
        histories = self.histories
        with naming_thread(config):
            key = named_key(config) or latest_key(await self.aget_tuple(config))
            if key is None:
                return no_messages()
            if (cached := histories.cached_at(key)) is not None:
                return cached
            async with postgres_cursor(self) as cur:
                rebuilt = await adrive(cur, histories.rebuild(key))
            history, steps = histories.rebuilt(key, rebuilt)
            if steps is not None:
                try:
                    async with postgres_cursor(self) as cur, cur.connection.transaction():
                        histories.stored.know(key[:2], await adrive(cur, steps))
                except psycopg.Error as error:
                    log.debug("history of %s not stored: %s", key[0], error)
            return history

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

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread (from Studio, say) with Ferry's rows and histories of it."""
        await super().adelete_thread(thread_id)
        async with postgres_cursor(self) as cur:
            for statement in DELETE_FERRY_ROWS:
                await cur.execute(statement, (str(thread_id),))
        self.histories.forget(str(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints and writes, and what they left on the thread.

        The server's `multitask_strategy="rollback"` runs it (`run_follow_ups`).
        """
        wanted = [str(run_id) for run_id in run_ids]
        if not wanted:
            return
        async with postgres_cursor(self) as cur, cur.connection.transaction():
            await cur.execute(DELETE_CHECKPOINTS, (wanted,))
            deleted = await cur.fetchall()
            for statement, params in run_follow_ups(deleted):
                await cur.execute(statement, params)
        for thread_id in _threads_of(deleted):
            self.histories.forget(thread_id)

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
        """Ids of the threads last updated before `cutoff` (from a worker thread)."""
        return stored_threads.threads_updated_before(self, cutoff)

    def thread_summaries(self) -> list[tuple[Any, ...]]:
        """Each thread's listing row (from a worker thread, on the saver's loop)."""
        return list(on_its_loop(saver_loop(self), self.athread_summaries()))

    def store_summary(self, row: Row) -> None:
        """Write a thread's summary row (from a worker thread, on the saver's loop)."""
        on_its_loop(saver_loop(self), self.astore_summary(row))

    async def athread_summaries(self) -> list[tuple[Any, ...]]:
        """Each thread's listing row (`graph.storage.threads.summaries.LISTING`)."""
        async with postgres_cursor(self) as cur:
            await cur.execute(LISTING)
            return [tuple(row.values()) for row in await cur.fetchall()]

    async def astore_summary(self, row: Row) -> None:
        """Write a thread's summary row; nothing if the database may not be written."""
        try:
            async with postgres_cursor(self) as cur:
                await cur.execute(SAVE_POSTGRES, row)
        except psycopg.Error as error:
            log.debug("summary of %s not stored: %s", row[0], error)

    def leases(self, timeout_s: float, *, holder: str) -> LeaseStore | None:
        """Advisory locks on the database, on connections of their own (`leases.postgres`)."""
        return postgres_leases(self, timeout_s)


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
