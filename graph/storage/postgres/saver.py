"""Threads in PostgreSQL (`FERRY_DATABASE_URL`), for the CLI, Python and the server alike.

LangGraph's Postgres savers are used with their own serializer and channel versions everywhere,
so a thread started by any entry point continues in any other. Messages are stored as each
step's writes (see `graph.state`): a thread grows with its conversation, as in SQLite. As in
SQLite, a saved history per thread, extended by parts, spares a new process the replay from
the thread's start, and a summary row per thread spares `ferry threads` every replay
(`graph.storage.postgres.kept`).
"""

from __future__ import annotations

import asyncio
import atexit
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from graph.settings import ConfigError
from graph.storage.codec.allowlist import NamesThreadOnRefusal
from graph.storage.codec.serde import serializer
from graph.storage.postgres import layout_versions
from graph.storage.postgres.history import KeptHistories
from graph.storage.threads.started import RecordsStartsOnItsLoop
from graph.storage.threads.summaries import DELETE_POSTGRES

try:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from graph.storage.postgres.kept import AsyncKeepsHistories, KeepsHistories
except ImportError as exc:  # the optional extra is not installed
    raise ConfigError(
        "FERRY_DATABASE_URL needs Postgres support: pip install 'ferry-agent[postgres]'"
    ) from exc

# What LangGraph's Postgres savers expect of a connection: each statement commits on its own
# (setup creates indexes CONCURRENTLY), rows come as dicts, and no server-side prepared
# statements, which poolers such as PgBouncer do not carry between connections.
_CONNECTION = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
_CONNECT_TIMEOUT_S = 10
# Several processes may start on a new database at once; its tables are created by one of them.
_SETUP_LOCK = 0x6665_7272  # "ferr"
_SETUP_WAIT_S = 60
_RECORD_START = "INSERT INTO ferry_started_calls VALUES (%s, %s) ON CONFLICT DO NOTHING"
_FORGET_START = "DELETE FROM ferry_started_calls WHERE thread_id = %s AND tool_call_id = %s"
_TABLES = (
    *("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
    *("ferry_started_calls", "ferry_histories", "ferry_history_parts", "ferry_thread_summaries"),
)
_DELETE_FERRY_ROWS = (
    "DELETE FROM ferry_started_calls WHERE thread_id = %s",
    "DELETE FROM ferry_histories WHERE thread_id = %s",
    "DELETE FROM ferry_history_parts WHERE thread_id = %s",
    DELETE_POSTGRES,
)


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


class FerryPostgresSaver(KeepsHistories, NamesThreadOnRefusal, PostgresSaver):
    """LangGraph's Postgres saver with Ferry's serializer, rows and kept histories."""

    def __init__(
        self, conn: psycopg.Connection[DictRow] | ConnectionPool[psycopg.Connection[DictRow]]
    ) -> None:
        super().__init__(conn, serde=serializer())
        self.kept = KeptHistories()

    def setup(self) -> None:
        """Create or migrate LangGraph's tables, and Ferry's."""
        super().setup()
        with self._cursor() as cur:
            layout_versions.migrate(cur)  # Ferry's tables at its layout version; newer refused

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        with self._cursor() as cur:
            cur.execute(_RECORD_START, (thread_id, tool_call_id))
            return cur.rowcount == 1

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        with self._cursor() as cur:
            cur.execute(_FORGET_START, (thread_id, tool_call_id))

    def thread_ids(self) -> list[str]:
        """Ids of the stored threads."""
        with self._cursor() as cur:
            cur.execute("SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = ''")
            return [row["thread_id"] for row in cur.fetchall()]

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes, and Ferry's rows and histories of it."""
        super().delete_thread(thread_id)
        with self._cursor() as cur:
            for statement in _DELETE_FERRY_ROWS:
                cur.execute(statement, (str(thread_id),))
        self.kept.forget(str(thread_id))

    def stored_bytes(self) -> int:
        """Disk space the threads take: Ferry's tables with their indexes and TOAST data."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) AS size "
                "FROM unnest(%s::text[]) AS t",
                (list(_TABLES),),
            )
            row = cur.fetchone()
            return int(row["size"]) if row else 0


def stored_thread_ids(url: str) -> set[str]:
    """Ids of the threads stored at `url`; none while its tables do not exist."""
    with connect(url) as conn:
        row = conn.execute("SELECT to_regclass('checkpoints') IS NOT NULL AS ready").fetchone()
        if not (row and row["ready"]):
            return set()
        return set(FerryPostgresSaver(conn).thread_ids())


def _set_up(conn: psycopg.Connection[DictRow]) -> None:
    """Create or migrate the tables, one process at a time."""
    # Not `pg_advisory_lock`: a session waiting inside it holds a transaction open, which the
    # holder's CREATE INDEX CONCURRENTLY waits for in turn, a deadlock. Polling holds none.
    deadline = time.monotonic() + _SETUP_WAIT_S
    while not _locked(conn):
        if time.monotonic() > deadline:
            raise ConfigError("Postgres (FERRY_DATABASE_URL): another process is still setting up")
        time.sleep(0.05)
    try:
        FerryPostgresSaver(conn).setup()
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
def open_postgres_saver(url: str) -> Iterator[FerryPostgresSaver]:
    """A saver on one connection for the length of a command, closed afterwards."""
    conn = connect(url)
    saver = FerryPostgresSaver(conn)
    try:
        _set_up(conn)
        yield saver
    finally:
        # A run that failed may still be saving a checkpoint from a worker thread: let it finish.
        with saver.lock:
            conn.close()


class AsyncFerryPostgresSaver(
    RecordsStartsOnItsLoop, AsyncKeepsHistories, NamesThreadOnRefusal, AsyncPostgresSaver
):
    """LangGraph's async Postgres saver, for the server; a refused value names its thread."""

    def __init__(self, conn: Any, *, serde: Any = None) -> None:
        super().__init__(conn, serde=serde or serializer())
        self.kept = KeptHistories()

    async def afirst_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        async with self._cursor() as cur:
            await cur.execute(_RECORD_START, (thread_id, tool_call_id))
            return cur.rowcount == 1

    async def aforget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        async with self._cursor() as cur:
            await cur.execute(_FORGET_START, (thread_id, tool_call_id))

    async def setup(self) -> None:
        """Create or migrate LangGraph's tables, and Ferry's."""
        await super().setup()
        async with self._cursor() as cur:
            await layout_versions.amigrate(cur)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread (from Studio, say) with Ferry's rows and histories of it."""
        await super().adelete_thread(thread_id)
        async with self._cursor() as cur:
            for statement in _DELETE_FERRY_ROWS:
                await cur.execute(statement, (str(thread_id),))
        self.kept.forget(str(thread_id))


def postgres_saver(url: str) -> FerryPostgresSaver:
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
    return FerryPostgresSaver(pool)


@asynccontextmanager
async def async_postgres_saver(url: str) -> AsyncIterator[AsyncFerryPostgresSaver]:
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
        yield AsyncFerryPostgresSaver(pool, serde=serializer())
