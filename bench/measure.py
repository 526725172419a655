"""What the benchmark measures: bytes on disk, bytes of the messages, time."""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from graph.storage.threads.reading import message_record  # what `ferry history --json` shows


def raw_bytes(messages: Iterable[BaseMessage]) -> int:
    """The raw size of a conversation: UTF-8 bytes of each message's JSON record, summed.

    The record is system-independent (no ids, metadata or framework fields), so the same
    conversation has the same raw size in Ferry and in the reference.
    """
    return sum(
        len(json.dumps(message_record(m), ensure_ascii=False, separators=(",", ":")).encode())
        for m in messages
    )


def db_bytes(path: Path) -> int:
    """Bytes on disk for the database at `path`, after folding the WAL into the main file.

    Sums every file next to `path` whose name starts with its name (`.db`, `-wal`, any side
    file), except `-shm`, which is an index of the WAL, not data.
    """
    if path.exists():
        conn = sqlite3.connect(path, timeout=60)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    return sum(
        p.stat().st_size
        for p in path.parent.iterdir()
        if p.name.startswith(path.name) and not p.name.endswith("-shm")
    )


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall time of `repeat` calls of `fn`."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes of pages per table and index (SQLite's `dbstat`), to see where the file goes."""
    conn = sqlite3.connect(path, timeout=60)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.OperationalError:  # SQLite built without dbstat
        return {}
    finally:
        conn.close()
    return {name: int(size) for name, size in rows}
