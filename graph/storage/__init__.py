"""Where threads live: SQLite at `FERRY_DB`, or PostgreSQL at `FERRY_DATABASE_URL`.

Every saver Ferry uses is opened here, from the settings or a path (`graph.storage.sqlite.saver`,
`graph.storage.postgres.saver`): the CLI, Python, the server and the Temporal worker all go
through these factories, so every entry point reads and writes the same threads. Each takes the
`messages` reducer as `fold=` from the layer that opens it (storage imports nothing of the
agent: `graph.storage.history.folding`). What the loop and the CLI rely on of a saver they make
is `graph.storage.ferry_store.FerryStore`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from graph.core.settings import Settings
    from graph.storage.codec.serde import FerrySerializer
    from graph.storage.errors import DatabaseError
    from graph.storage.history.folding import Fold
    from graph.storage.postgres.saver import AsyncFerryPostgresSaver, FerryPostgresSaver
    from graph.storage.sqlite.saver import FerrySaver, connect

__all__ = [
    "DatabaseError",
    "FerrySaver",
    "connect",
    "database_name",
    "default_saver",
    "given_saver",
    "open_async_saver",
    "open_saver",
    "open_sqlite_saver",
    "sqlite_saver",
]


def __getattr__(name: str) -> Any:
    """`FerrySaver`, `connect` and `DatabaseError`, imported when first used.

    Listing threads needs no saver, and `import graph` not even pydantic.
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
    from graph.storage.sqlite.saver import read_only

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


def sqlite_saver(
    path: Path | str, *, fold: Fold | None = None, serde: FerrySerializer | None = None
) -> FerrySaver:
    """A saver on `path` whose connection lives as long as the process.

    `fold` is the `messages` reducer (`graph.storage.history.folding`). Without one, LangGraph
    folds the stored writes with the graph's own reducer; `build_graph` hands a saver made
    without one Ferry's (`given_saver`), so `build_graph(checkpointer=sqlite_saver(path))`
    folds as Ferry's graph does. `serde`: the serializer, by default the settings' one.
    """
    from graph.storage.sqlite.saver import FerrySaver, open_file

    return FerrySaver(open_file(Path(path)), serde, fold=fold)


@contextmanager
def open_sqlite_saver(
    path: Path | str, *, fold: Fold | None = None, serde: FerrySerializer | None = None
) -> Iterator[FerrySaver]:
    """A saver on `path` for the length of a command, closed afterwards (`fold`, `serde`: above)."""
    with _closed_afterwards(sqlite_saver(path, fold=fold, serde=serde)) as saver:
        yield saver


@contextmanager
def _closed_afterwards(saver: FerrySaver) -> Iterator[FerrySaver]:
    try:
        yield saver
    finally:
        saver.close()


if TYPE_CHECKING:
    Saver: TypeAlias = FerrySaver | FerryPostgresSaver
    """What `default_saver` and `open_saver` return."""
    AsyncSaver: TypeAlias = FerrySaver | AsyncFerryPostgresSaver
    """What `open_async_saver` yields."""

_Checkpointer = TypeVar("_Checkpointer", bound="BaseCheckpointSaver[Any]")


def default_saver(settings: Settings, *, fold: Fold | None = None) -> Saver:
    """A saver for the life of the process: Postgres at `FERRY_DATABASE_URL`, else `FERRY_DB`.

    `fold` is the `messages` reducer, as for `sqlite_saver`.
    """
    if settings.database_url:
        from graph.storage.postgres.saver import postgres_saver

        return postgres_saver(settings.database_url, fold=fold)
    return sqlite_saver(settings.db, fold=fold)


@contextmanager
def open_saver(settings: Settings, *, fold: Fold | None = None) -> Iterator[Saver]:
    """A saver for the length of a command, closed afterwards (Postgres or SQLite, as above).

    A database that cannot be opened or read fails with a `DatabaseError` naming it.
    """
    try:
        with _open_saver(settings, fold) as saver:
            yield saver
    except _database_errors() as exc:
        raise _database_error(settings, exc) from exc


@contextmanager
def _open_saver(settings: Settings, fold: Fold | None) -> Iterator[Saver]:
    if settings.database_url:
        from graph.storage.postgres.saver import open_postgres_saver

        with open_postgres_saver(settings.database_url, fold=fold) as postgres:
            yield postgres
        return
    try:
        opened = sqlite_saver(settings.db, fold=fold)
    except OSError as exc:  # its folder cannot be created
        raise _database_error(settings, exc) from exc
    with _closed_afterwards(opened) as saver:
        yield saver


@asynccontextmanager
async def open_async_saver(
    settings: Settings, *, fold: Fold | None = None, serde: FerrySerializer | None = None
) -> AsyncIterator[AsyncSaver]:
    """The server's saver, open for its lifetime: nothing it does blocks the event loop.

    Postgres's async saver on a connection pool, or Ferry's SQLite saver, whose async methods
    run the sync ones in worker threads (`graph.storage.sqlite.saver`). `fold` and `serde`
    as for `sqlite_saver`.
    """
    if settings.database_url:
        from graph.storage.postgres.saver import async_postgres_saver

        async with async_postgres_saver(settings.database_url, fold=fold, serde=serde) as pg:
            yield pg
        return
    import asyncio

    from graph.storage.sqlite.saver import FerrySaver, connect

    conn = await asyncio.to_thread(connect, settings.db)  # not read-only: the server writes
    with _closed_afterwards(FerrySaver(conn, serde, fold=fold)) as saver:
        await asyncio.to_thread(saver.setup)
        yield saver


def given_saver(checkpointer: _Checkpointer, *, fold: Fold) -> _Checkpointer:
    """A checkpointer a caller handed in, used as given (`graph.storage.sqlite.stock`).

    Only a Ferry saver opened without a reducer is given `fold`, the graph's: it then folds
    the graph's messages itself instead of leaving them to LangGraph. A stock SQLite saver's
    cost is logged once.
    """
    from graph.storage.ferry_store import ferry_store
    from graph.storage.sqlite.stock import as_given

    store = ferry_store(checkpointer)
    if store is not None and store.fold is None:
        store.fold = fold
    as_given(checkpointer)
    return checkpointer
