"""`ferry migrate FILE`: a file's threads in LangGraph's tables, converted into Ferry's layout.

A file written by an earlier Ferry, or by LangGraph's own `SqliteSaver` (what LangGraph's docs
teach), keeps its checkpoints in LangGraph's `checkpoints` and `writes`. Ferry never moves them
on its own: opening such a file only says so, once (`graph.storage.sqlite.saver`). `migrate`
is the explicit step:

- a backup first, `FILE.before-migrate-<UTC time>`, made with SQLite's backup API (what the
  WAL holds included) while the file's write lock is already held, so it is the file exactly
  as the conversion found it;
- then, in that one transaction, Ferry's tables, the integer versions of the earliest Ferry
  spelled as strings (`upgrade_rows`, `graph.storage.sqlite.layout.compact_version`) and the
  rows moved
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
import sqlite3
from collections.abc import Callable, Collection, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graph.storage.codec.reads import StoredValueError
from graph.storage.errors import DatabaseError
from graph.storage.sqlite import layout_versions
from graph.storage.sqlite.layout import compact_version
from graph.storage.sqlite.layout_versions import has_table
from graph.storage.sqlite.moving import Moved, move_rows
from graph.storage.sqlite.ownership import not_ferrys

log = logging.getLogger("ferry.versions")
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
                for statement in layout_versions.ferry_tables():
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


def _as_text(versions: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    text = {k: compact_version(v) if isinstance(v, int) else v for k, v in versions.items()}
    return text, text != versions


def _upgraded(checkpoint: dict[str, Any]) -> bool:
    """Spell a checkpoint's integer versions in Ferry's format; whether any were changed."""
    checkpoint["channel_versions"], changed = _as_text(checkpoint.get("channel_versions", {}))
    for node, seen in checkpoint.get("versions_seen", {}).items():
        checkpoint["versions_seen"][node], seen_changed = _as_text(seen)
        changed = changed or seen_changed
    return changed


def upgrade_rows(
    conn: sqlite3.Connection, serde: Any, thread_ids: Collection[str] | None = None
) -> int:
    """Spell the integer versions an earlier Ferry stored in LangGraph's `checkpoints` as strings.

    Only the rows of `thread_ids` (every row if None), inside the caller's transaction: it
    commits nothing, so the rewrite and whatever the caller does with the rows (`ferry migrate`
    moves them) stand or fall together. A row that cannot be decoded (a missing key) is left as
    it is, and said so. Returns how many rows were rewritten.
    """
    if thread_ids is None:
        thread_ids = [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")]
    rewritten = 0
    for thread_id in thread_ids:  # a thread's rows at a time: a file's may not fit in memory
        rewritten += _upgrade_thread(conn, serde, thread_id)
    return rewritten


def _upgrade_thread(conn: sqlite3.Connection, serde: Any, thread_id: object) -> int:
    rows = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, type, checkpoint FROM checkpoints "
        "WHERE thread_id IS ?",
        (thread_id,),
    ).fetchall()
    rewritten = 0
    for namespace, checkpoint_id, type_tag, blob in rows:
        if not isinstance(type_tag, str | None) or not isinstance(blob, bytes):
            continue  # no saver wrote it: the move leaves it where it is, and says so
        try:
            checkpoint = serde.loads_typed((type_tag, blob))
        except StoredValueError as error:  # refused when its thread is read, naming it
            log.warning("thread %s: a checkpoint's versions not upgraded: %s", thread_id, error)
            continue
        if isinstance(checkpoint, dict) and _upgraded(checkpoint):
            conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ? "
                "WHERE thread_id IS ? AND checkpoint_ns IS ? AND checkpoint_id IS ?",
                (*serde.dumps_typed(checkpoint), thread_id, namespace, checkpoint_id),
            )
            rewritten += 1
    return rewritten
