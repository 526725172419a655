"""Grow one thread turn by turn and measure what storage each turn adds, early and late.

What is measured is the bytes of the rows Ferry stores for the thread's steps (checkpoints and
writes: their keys and values), not the file's size: a file grows in whole pages (B-tree
splits), so its size over a few turns moves by luck, not by what a turn stores.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any


def bytes_per_turn(
    graph: Any, stored_bytes: Callable[[], int], *, early: int, late: int, span: int
) -> tuple[float, float, dict[str, Any]]:
    """Bytes one turn adds around turn `early` and around `late` (averaged over `span` turns).

    Returns both averages and the last result, so the caller can check the conversation too.
    """
    config = {"configurable": {"thread_id": "growth"}}
    sizes: dict[int, int] = {}
    result: dict[str, Any] = {}
    for turn in range(1, late + span + 1):
        result = graph.invoke({"messages": [("user", f"Question {turn}")]}, config)
        assert result["stop_reason"] == "answered"
        if turn in (early, early + span, late, late + span):
            sizes[turn] = stored_bytes()
    early_bytes = (sizes[early + span] - sizes[early]) / span
    late_bytes = (sizes[late + span] - sizes[late]) / span
    return early_bytes, late_bytes, result


STEP_TABLES = ("ferry_steps", "ferry_writes", "ferry_parts")
"""The tables a thread's steps are stored in: checkpoints, writes, and the parts of a long
history the writes refer to (a file may not have that one yet)."""


def sqlite_stored_bytes(path: Path) -> int:
    """Bytes of every step and task's writes stored in a SQLite file (keys, values; not pages)."""
    return _column_bytes(path, STEP_TABLES)


def sqlite_all_bytes(path: Path) -> int:
    """Bytes of every value and key Ferry stores for threads in a SQLite file (columns, not pages).

    Everything a thread costs: its steps and writes, and the row naming its number.
    """
    return _column_bytes(path, ("ferry_threads", *STEP_TABLES))


def _column_bytes(path: Path, tables: tuple[str, ...]) -> int:
    """The summed length of every column of every row of `tables` (a number as its digits)."""
    conn = sqlite3.connect(path)
    try:
        total = 0
        for table in tables:
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            if not columns:  # not in this file
                continue
            lengths = " + ".join(f"coalesce(length(CAST({c} AS BLOB)), 0)" for c in columns)
            total += int(
                conn.execute(f"SELECT coalesce(sum({lengths}), 0) FROM {table}").fetchone()[0]
            )
    finally:
        conn.close()
    return total


def postgres_stored_bytes(url: str) -> int:
    """Bytes of every stored checkpoint, blob and write in a Postgres database (rows, not pages)."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints c) "
            "+ (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM checkpoint_blobs b) "
            "+ (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM checkpoint_writes w)"
        ).fetchone()
    assert row is not None
    return int(row[0])
