"""Where threads live: SQLite at `FERRY_DB`, or PostgreSQL at `FERRY_DATABASE_URL`.

The factories below choose (`graph.storage.sqlite.saver`, `graph.storage.postgres.saver`); the CLI,
Python and the server all go through them, so every entry point reads and writes the same threads.
What the loop and the CLI rely on of a saver they make is `graph.storage.ferry_store.FerryStore`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from graph.core.settings import Settings
    from graph.storage.errors import DatabaseError
    from graph.storage.history.folding import Fold
    from graph.storage.postgres.saver import FerryPostgresSaver
    from graph.storage.sqlite.saver import FerrySaver, connect

__all__ = [
    "DatabaseError",
    "FerrySaver",
    "connect",
    "database_name",
    "default_saver",
    "open_saver",
    "sqlite_saver",
]


def __getattr__(name: str) -> Any:
    """`FerrySaver`, `connect` and `DatabaseError`, imported when first used.

    Listing threads needs no saver, and `import graph` (which hands storage its reducer,
    `graph.storage.history.folding`) not even pydantic.
    """
    if name in ("FerrySaver", "connect"):
        from graph.storage.sqlite import saver as sqlite

        return getattr(sqlite, name)
    if name == "DatabaseError":
        from graph.storage.errors import DatabaseError

        return DatabaseError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def database_name(settings: Settings) -> str:
    """The database in use, as a person can find it: the SQLite path, or the Postgres host."""
    if settings.database_url:
        url = urlsplit(settings.database_url)
        where = f"{url.hostname or 'localhost'}{f':{url.port}' if url.port else ''}"
        return f"postgres {where}{url.path}"  # never the user name or password
    return str(settings.db.absolute())


def _database_error(settings: Settings, exc: Exception) -> DatabaseError:
    """`exc`, naming the database and the setting to fix."""
    if settings.database_url:
        setting = "FERRY_DATABASE_URL"
    else:
        setting = "FERRY_DB (or FERRY_DATABASE_URL for Postgres)"
    from graph.storage.sqlite.file import read_only

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if not settings.database_url and read_only(settings.db):
        first += " (the file is read-only: its threads can be listed and read, not continued)"
    elif not settings.database_url and _disk_trouble(first):
        first += f" ({_free_space(settings.db)})"
    from graph.storage.errors import DatabaseError

    return DatabaseError(f"database {database_name(settings)}: {first}; check {setting}")


def _disk_trouble(message: str) -> bool:
    """Whether SQLite's error is one a full disk gives (a write, or a WAL's `-shm` not made)."""
    return any(
        words in message.lower()
        for words in ("disk is full", "disk i/o error", "unable to open database file")
    )


def _free_space(path: Path) -> str:
    """The free space where the file lives, in words a person acts on."""
    import shutil

    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), Path("/"))
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "is its disk full?"
    if free < 64 * 1024 * 1024:
        return f"the disk holding {folder} is full or nearly: {free // (1024 * 1024)} MB free"
    return f"{free // (1024 * 1024)} MB free on the disk holding {folder}"


def _database_errors() -> tuple[type[Exception], ...]:
    """The errors that mean the database itself is unusable (not a stored value refused)."""
    errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)
    try:
        import psycopg
    except ImportError:  # Postgres is optional
        return errors
    return (*errors, psycopg.OperationalError)


def open_file(path: Path) -> sqlite3.Connection:
    """Connect to the SQLite file; read-only when it may not be written, so it can still be read."""
    from graph.storage.sqlite.file import read_only

    if not read_only(path):
        from graph.storage.sqlite.saver import connect

        return connect(path)
    uri = f"{path.absolute().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def sqlite_saver(path: Path | str, *, fold: Fold | None = None) -> FerrySaver:
    """A saver on `path` whose connection lives as long as the process.

    `fold` is the `messages` reducer; by default Ferry's, which `graph` hands storage as it is
    imported (`graph.storage.history.folding`): pass your own for a graph of yours.
    """
    from graph.storage.sqlite.saver import FerrySaver

    return FerrySaver(open_file(Path(path)), fold=fold)


if TYPE_CHECKING:
    Saver: TypeAlias = FerrySaver | FerryPostgresSaver
    """What `default_saver` and `open_saver` return."""


def default_saver(settings: Settings) -> Saver:
    """A saver for the life of the process: Postgres at `FERRY_DATABASE_URL`, else `FERRY_DB`."""
    if settings.database_url:
        from graph.storage.postgres.saver import postgres_saver

        return postgres_saver(settings.database_url)
    return sqlite_saver(settings.db)


@contextmanager
def open_saver(settings: Settings) -> Iterator[Saver]:
    """A saver for the length of a command, closed afterwards (Postgres or SQLite, as above).

    A database that cannot be opened or read fails with a `DatabaseError` naming it.
    """
    try:
        with _open_saver(settings) as saver:
            yield saver
    except _database_errors() as exc:
        raise _database_error(settings, exc) from exc


@contextmanager
def _open_saver(settings: Settings) -> Iterator[Saver]:
    if settings.database_url:
        from graph.storage.postgres.saver import open_postgres_saver

        with open_postgres_saver(settings.database_url) as postgres:
            yield postgres
        return
    try:
        conn = open_file(settings.db)
    except OSError as exc:  # its folder cannot be created
        raise _database_error(settings, exc) from exc
    from graph.storage.sqlite.saver import FerrySaver

    saver = FerrySaver(conn)
    try:
        yield saver
    finally:
        # A run that failed may still be saving a checkpoint from a worker thread; closing the
        # connection under its feet crashes SQLite, so wait for the saver's lock first.
        with saver.lock:
            saver.conn.close()
