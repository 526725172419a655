"""The layout version of a Ferry SQLite file, checked at open, and the migrations between them.

A file's version is `PRAGMA user_version`. Before versions were stamped, that pragma held 0, or
1 once an earliest Ferry's integer channel versions had been spelled as strings
(`graph.storage.sqlite.layout.compact_version`): such a file is version 1 if it has all of
Ferry's tables, else 0. From 2 on, the pragma is the version itself. `MIGRATIONS[k]` takes a
file from version k to k+1, in one transaction with the stamp: a process killed inside leaves
the version before. Only ever append to it (graph/storage/FORMAT.md, "Layout versions").
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

log = logging.getLogger("ferry.saver")

Migration = Callable[[sqlite3.Connection, Any], None]
"""One step: given the file inside its write transaction, and the saver's serializer."""

_FERRY_TABLES = (
    "ferry_threads", "ferry_steps", "ferry_writes", "ferry_parts", "ferry_started_calls",
    "ferry_thread_summaries",
)  # fmt: skip
_FIRST_STAMP = 2  # user_version 0 and 1 kept their old meaning; a stamp below this is read so


def ferry_tables() -> tuple[str, ...]:
    """The statements that create Ferry's tables: the steps', started calls, summary rows.

    Only a file being given its tables needs them (a migration, `ferry migrate`), not a saver
    opening a file already at this layout.
    """
    from graph.storage.sqlite import layout
    from graph.storage.threads.started import STARTED_CALLS_TABLE
    from graph.storage.threads.summaries import SUMMARIES_TABLE

    # WITHOUT ROWID in SQLite (the same columns as in Postgres): a table's rows then live in
    # its primary key's b-tree, with no second page for a separate index.
    return (
        *layout.TABLES,
        f"{STARTED_CALLS_TABLE} WITHOUT ROWID",
        f"{SUMMARIES_TABLE} WITHOUT ROWID",
    )


def create_ferry_tables(conn: sqlite3.Connection, serde: Any) -> None:
    """0 → 1: Ferry's tables.

    Rows in LangGraph's tables are left as they are: converting them (an earliest Ferry's
    integer versions too) is `ferry migrate`'s, asked for, with a backup.
    """
    for statement in ferry_tables():
        conn.execute(statement)


MIGRATIONS: tuple[Migration, ...] = (create_ferry_tables,)
"""Each step from version k to k+1, in order: appended to, never changed or reordered."""


def current() -> int:
    """The layout version this Ferry writes."""
    return len(MIGRATIONS)


def layout_version(conn: sqlite3.Connection) -> int:
    """The file's layout version, stamped or (before stamps) recognised by its tables."""
    stamped = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if stamped >= _FIRST_STAMP:
        return stamped
    found = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return 1 if found.issuperset(_FERRY_TABLES) else 0


def made_by_newer_ferry(conn: sqlite3.Connection) -> bool:
    """Whether the file's layout is newer than this Ferry knows."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0]) > current()


def refuse_newer(conn: sqlite3.Connection, version: int) -> None:
    """Refuse, in one line naming the file, a layout newer than this Ferry knows."""
    if version > current():
        from graph.storage.errors import LayoutVersionError

        raise LayoutVersionError(
            f"{_named(conn)}: layout version {version}, made by a newer Ferry; upgrade Ferry "
            f"(this one reads layout versions up to {current()})"
        )


def up_to_date(conn: sqlite3.Connection, serde: Any) -> sqlite3.Connection:
    """`conn` at this Ferry's layout version; a read-only file is left as it is.

    A read-only file of an older layout is copied into memory and the copy brought up to date
    (returned instead of `conn`, which is closed). A newer layout is refused before anything is
    written; a file kept locked past the busy timeout fails naming it.
    """
    version = layout_version(conn)
    refuse_newer(conn, version)
    stamped = int(conn.execute("PRAGMA user_version").fetchone()[0]) == current()
    if version == current() and stamped:
        return conn
    try:
        _migrate(conn, serde)
    except sqlite3.OperationalError as error:
        if error.sqlite_errorname != "SQLITE_READONLY":
            raise
        if version == current():
            return conn  # only the stamp is missing: readable as it is
        log.debug("read-only file of layout version %d: read from a copy in memory", version)
        copy = sqlite3.connect(":memory:", check_same_thread=False)
        conn.backup(copy)
        conn.close()
        _migrate(copy, serde)
        return copy
    return conn


def _migrate(conn: sqlite3.Connection, serde: Any) -> None:
    """Apply the missing steps and the stamp, in one write transaction."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if error.sqlite_errorname not in ("SQLITE_BUSY", "SQLITE_LOCKED"):
            raise
        from graph.storage.errors import LayoutVersionError

        raise LayoutVersionError(
            f"{_named(conn)}: cannot bring it to layout version {current()}: {error} "
            "(another process kept it busy past the busy timeout); try again"
        ) from error
    try:
        version = layout_version(conn)  # again, now that no other process can change it
        refuse_newer(conn, version)
        for step in range(version, current()):
            MIGRATIONS[step](conn, serde)
        conn.execute(f"PRAGMA user_version = {current()}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if version < current():
        log.info("%s: layout version %d brought to %d", _named(conn), version, current())


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file has the table `name`."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


def file_of(conn: sqlite3.Connection) -> str:
    """The file `conn` is open on ('' in memory)."""
    return next(str(row[2]) for row in conn.execute("PRAGMA database_list") if row[1] == "main")


def _named(conn: sqlite3.Connection) -> str:
    """The file `conn` is open on, as a person can find it."""
    return file_of(conn) or "the database in memory"
