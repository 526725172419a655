"""`ferry migrate FILE`: a file's threads in LangGraph's tables, converted into Ferry's layout.

A file written by an earlier Ferry, or by LangGraph's own `SqliteSaver` (what LangGraph's docs
teach), keeps its checkpoints in LangGraph's `checkpoints` and `writes`. Ferry never moves them
on its own: opening such a file only says so, once (`notice`). `migrate` is the explicit step:

- a backup first, `FILE.before-migrate-<UTC time>`, made with SQLite's backup API (what the
  WAL holds included) while the file's write lock is already held, so it is the file exactly
  as the conversion found it;
- then, in that one transaction, Ferry's tables, the integer versions of the earliest Ferry
  spelled as strings (`graph.storage.sqlite.versions`) and the rows moved
  (`graph.storage.sqlite.moving`): a process killed at any point leaves the file as it was
  before or as it is after, never between;
- only Ferry's threads (`graph.storage.sqlite.ownership`) unless asked for others (`everything`,
  or `thread_ids`): another application's threads stay where its own saver reads them.

A busy file (another connection holding a write transaction) is waited for up to the busy
timeout, then refused: nothing is changed and no backup is left.
"""

from __future__ import annotations

import logging
import os
import shlex
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graph.storage.errors import DatabaseError
from graph.storage.sqlite import layout, layout_versions
from graph.storage.sqlite.moving import Moved, move_rows
from graph.storage.sqlite.ownership import not_ferrys
from graph.storage.sqlite.schema import FERRY_TABLES, has_table

log = logging.getLogger("ferry.saver")
BUSY_TIMEOUT_S = 30.0
"""How long `migrate` waits for another process's write transaction by default."""


class MigrationError(DatabaseError):
    """The file cannot be converted as asked; nothing was changed. One line naming the fix."""


@dataclass
class Migrated:
    """What `migrate` did: the backup, the threads moved and those left, with why."""

    path: Path
    backup: Path | None = None
    moved: dict[str, int] = field(default_factory=dict)  # thread → checkpoints moved
    left: dict[str, str] = field(default_factory=dict)  # thread → why it stayed
    rows_left: int = 0  # rows of moved threads that stayed (no saver wrote them, or taken)
    rows_left_threads: list[str] = field(default_factory=list)


def langgraph_threads(conn: sqlite3.Connection) -> int:
    """How many threads LangGraph's `checkpoints` table holds (0 without one)."""
    if not has_table(conn, "checkpoints"):
        return 0
    return int(conn.execute("SELECT COUNT(DISTINCT thread_id) FROM checkpoints").fetchone()[0])


def notice(conn: sqlite3.Connection, path: str) -> None:
    """Say once per file and process that its threads in LangGraph's tables are not read."""
    if path and path not in _NOTICED and (found := langgraph_threads(conn)):
        _NOTICED.add(path)
        log.warning(
            "%s holds %d thread(s) in LangGraph's tables, which Ferry does not read; to convert "
            "Ferry's: ferry migrate %s",
            path, found, shlex.quote(path),
        )  # fmt: skip


_NOTICED: set[str] = set()  # the files `notice` spoke of, in this process


def migrate(
    path: Path,
    *,
    thread_ids: Sequence[str] = (),
    everything: bool = False,
    serde: Any = None,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    on_thread: Callable[[str, int], None] | None = None,
) -> Migrated:
    """Move the file's threads from LangGraph's tables into Ferry's, after a backup.

    Ferry's threads by default; `thread_ids` names the ones to move instead, `everything` moves
    them all. `on_thread(thread_id, checkpoints)` is told of each thread as it moves, inside the
    transaction. Raises `MigrationError` (nothing changed) for a missing, read-only, busy or
    foreign file, or a thread named that is not there.
    """
    from graph.storage.codec.serde import serializer

    _check_file(path)
    serde = serde or serializer()
    report = Migrated(path)
    with closing(_connect(path, busy_timeout_s)) as conn:
        if not _has_rows(conn):
            return report  # nothing to convert: no backup, no change
        _begin(conn, path, busy_timeout_s)
        try:
            layout_versions.refuse_newer(conn, layout_versions.layout_version(conn))
            chosen = _chosen(conn, serde, report, thread_ids, everything)
            if chosen or everything:
                report.backup = _backup(path)
                for statement in (*layout.TABLES, *FERRY_TABLES):
                    conn.execute(statement)
                _convert(conn, serde, None if everything else chosen, report, on_thread)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return report


def _has_rows(conn: sqlite3.Connection) -> bool:
    """Whether LangGraph's tables hold any row, of a thread or not (a row no saver wrote)."""
    tables = [t for t in ("checkpoints", "writes") if has_table(conn, t)]
    return any(conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() for t in tables)


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise MigrationError(f"{path}: no such file (ferry migrate converts an existing file)")
    if not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222:  # root obeys the mode
        raise MigrationError(
            f"{path} is read-only: migrate rewrites it (after a backup beside it); make it "
            "writable, or migrate a copy"
        )


def _connect(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        conn.close()
        raise MigrationError(f"{path} is not a SQLite database Ferry can read: {error}") from None
    return conn


def _begin(conn: sqlite3.Connection, path: Path, busy_timeout_s: float) -> None:
    """Take the file's write lock, waiting up to the busy timeout for another writer."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        raise MigrationError(
            f"{path} is busy: another process held its write lock for {busy_timeout_s:g} s "
            f"({error}); nothing was changed: stop that process and run ferry migrate again"
        ) from None


def _chosen(
    conn: sqlite3.Connection,
    serde: Any,
    report: Migrated,
    thread_ids: Sequence[str],
    everything: bool,
) -> list[str]:
    """The threads to move; the others go into `report.left` with why."""
    present = [
        row[0]
        for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id")
        if isinstance(row[0], str) and row[0]
    ]
    if missing := [t for t in thread_ids if t not in present]:
        raise MigrationError(
            f"{report.path}: no thread {missing[0]!r} in LangGraph's tables "
            f"(it holds {len(present)}; ferry migrate --all moves them all)"
        )
    if everything:
        return present
    if thread_ids:
        report.left = {t: "not named with --thread" for t in present if t not in thread_ids}
        return [t for t in present if t in thread_ids]
    chosen = []
    for thread_id in present:
        why = not_ferrys(conn, serde, thread_id)
        if why is None:
            chosen.append(thread_id)
        else:
            report.left[thread_id] = f"not Ferry's: {why}"
    return chosen


def _convert(
    conn: sqlite3.Connection,
    serde: Any,
    thread_ids: list[str] | None,
    report: Migrated,
    on_thread: Callable[[str, int], None] | None,
) -> None:
    from graph.storage.sqlite.versions import upgrade_rows

    upgrade_rows(conn, serde, thread_ids)  # an earliest Ferry's integers, as strings first
    moved: Moved = move_rows(conn, thread_ids)
    report.moved = dict(sorted(moved.checkpoints.items()))
    report.rows_left, report.rows_left_threads = moved.rows_left, sorted(moved.left_threads)
    for thread_id, checkpoints in report.moved.items():
        if on_thread is not None:
            on_thread(thread_id, checkpoints)


def _backup(path: Path) -> Path:
    """A copy of the file as it is now (what its WAL holds included), beside it."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    backup = path.with_name(f"{path.name}.before-migrate-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.before-migrate-{stamp}-{n}")
    # A connection of its own: the one holding the write lock cannot also be the backup's source
    # (SQLite's backup waits for it forever); this one reads the last commit, which that lock
    # keeps as it is until the conversion commits.
    source = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        with closing(sqlite3.connect(backup)) as copy:
            source.backup(copy)
    except (sqlite3.Error, OSError) as error:
        backup.unlink(missing_ok=True)
        raise MigrationError(f"{path}: no backup could be made at {backup}: {error}") from None
    finally:
        source.close()
    return backup
