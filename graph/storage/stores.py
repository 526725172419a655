"""The long-term memory store beside the threads: LangGraph's own, in the same database.

SQLite: LangGraph's `SqliteStore` on `FERRY_DB` (its tables, `store` and `store_migrations`,
sit beside Ferry's); Postgres: LangGraph's `PostgresStore` at `FERRY_DATABASE_URL`. The server
opens the same one (graph/server/store.py), so Studio's memory view, the CLI and Python read
the same memories. A database a caller hands in is not given a store: its tables are not ours.
"""

from __future__ import annotations

import atexit
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from langgraph.store.base import BaseStore

if TYPE_CHECKING:
    from langgraph.store.base import Op, Result
    from langgraph.store.sqlite import SqliteStore


def default_store(db: Path, database_url: str | None = None) -> BaseStore:
    """A store for the life of the process on `database_url`, else the SQLite file `db`."""
    if database_url:
        set_up_store(db, database_url)
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        pool: ConnectionPool = ConnectionPool(
            database_url,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            min_size=1,
            max_size=2,
            open=True,
            name="ferry-store",
        )
        atexit.register(pool.close)
        return PostgresStore(pool)  # type: ignore[arg-type]
    return _sqlite_store(db)


@contextmanager
def open_store(db: Path, database_url: str | None = None) -> Iterator[BaseStore]:
    """A store for the length of a command, closed afterwards (as `default_store` picks)."""
    if database_url:
        from langgraph.store.postgres import PostgresStore

        set_up_store(db, database_url)
        with PostgresStore.from_conn_string(database_url) as postgres:
            yield postgres
        return
    sqlite = _sqlite_store(db)
    try:
        yield sqlite
    finally:
        sqlite.conn.close()


def _sqlite_store(db: Path) -> SqliteStore:
    """LangGraph's store on `db`, on a connection of its own, its tables set up there first."""
    from langgraph.store.sqlite import SqliteStore

    from graph.storage.sqlite.saver import connect

    conn = _own_connection(connect(db))
    try:
        _migrate_sqlite_store(conn)
    except BaseException:
        conn.close()
        raise
    sqlite = SqliteStore(conn)
    sqlite.setup()  # nothing left to migrate: it only notes that it is set up
    return sqlite


def set_up_store(db: Path, database_url: str | None = None) -> None:
    """Create or migrate the store's tables, one process at a time.

    LangGraph's store setups read the migration they are at, then apply the next ones, each on
    its own: processes opening a new database at once would apply one twice, and all but one
    fail (on `store_migrations`' key, or "duplicate column"). Here Postgres's setup runs under
    Ferry's setup lock, and SQLite's migrations in one write transaction.
    """
    if database_url:
        from langgraph.store.postgres import PostgresStore

        from graph.storage.postgres.saver import connect as connect_postgres
        from graph.storage.postgres.saver import one_at_a_time

        with connect_postgres(database_url) as postgres:
            one_at_a_time(postgres, PostgresStore(postgres).setup)
        return
    from graph.storage.sqlite.saver import connect

    with closing(_own_connection(connect(db))) as conn:
        _migrate_sqlite_store(conn)


def _migrate_sqlite_store(conn: sqlite3.Connection) -> None:
    """Apply LangGraph's SQLite store migrations that `conn`'s file lacks, in one transaction.

    The same migrations and ledger as `SqliteStore.setup`, which applies each in a transaction
    of its own (`executescript` commits first): under one write lock, a second process waits,
    then finds them applied. Each migration is one statement; one that is not fails loudly.
    """
    from langgraph.store.sqlite import SqliteStore

    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS store_migrations (v INTEGER PRIMARY KEY)")
        (newest,) = conn.execute("SELECT max(v) FROM store_migrations").fetchone()
        first = 0 if newest is None else newest + 1
        for version, statement in enumerate(SqliteStore.MIGRATIONS[first:], start=first):
            conn.execute(statement)
            conn.execute("INSERT INTO store_migrations (v) VALUES (?)", (version,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _own_connection(conn: sqlite3.Connection) -> sqlite3.Connection:
    """The store's own connection, in autocommit: it begins and commits its transactions."""
    conn.isolation_level = None
    return conn


class StoreOnFirstUse(BaseStore):
    """The store `open_store` opens, opened when a run first reads or writes a memory.

    Most turns never do (a question without a word to look memories up by, no `remember` or
    `recall` call), and opening LangGraph's SQLite store costs more than such a turn: its module
    loads sqlite-vec, which loads numpy. `close` closes it if it was opened.
    """

    supports_ttl = True  # as LangGraph's SQLite and Postgres stores

    def __init__(self, db: Path, database_url: str | None = None) -> None:
        self._where = (db, database_url)
        self._opened: BaseStore | None = None
        self._stack = ExitStack()
        self._lock = threading.Lock()  # parallel tool calls may be the first to use it

    def _store(self) -> BaseStore:
        with self._lock:
            if self._opened is None:
                self._opened = self._stack.enter_context(open_store(*self._where))
            return self._opened

    def batch(self, ops: Iterable[Op]) -> list[Result]:  # noqa: D102 - BaseStore's own doc
        return self._store().batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:  # noqa: D102 - BaseStore's own doc
        return await self._store().abatch(ops)

    def close(self) -> None:
        """Close the store if it was opened."""
        with self._lock:
            self._stack.close()
            self._opened = None
