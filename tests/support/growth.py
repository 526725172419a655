"""Grow one thread turn by turn and measure what storage each turn adds, early and late.

What is measured is the bytes of the rows Ferry stores for the thread's steps (checkpoints and
writes), not the file's size: a file grows in whole pages (B-tree splits, the saved copy of a
history being renewed), so its size over a few turns moves by luck, not by what a turn stores.
The saved histories are left out: one bounded copy per thread, checked on its own.
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


def sqlite_stored_bytes(path: Path) -> int:
    """Bytes of every stored checkpoint and write in a SQLite file (columns, not pages)."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT (SELECT coalesce(sum(length(CAST(checkpoint AS BLOB)) "
            "+ length(CAST(metadata AS BLOB)) + length(checkpoint_id)), 0) FROM checkpoints) "
            "+ (SELECT coalesce(sum(length(CAST(value AS BLOB)) + length(channel) "
            "+ length(task_id)), 0) FROM writes)"
        ).fetchone()
    finally:
        conn.close()
    return int(row[0])


def sqlite_all_bytes(path: Path) -> int:
    """Bytes of every value and key Ferry and LangGraph store in a SQLite file (columns, not pages).

    Everything a thread costs: checkpoints, writes and saved histories, ids included.
    """
    conn = sqlite3.connect(path)
    try:
        total = 0
        for table in ("checkpoints", "writes", "ferry_histories"):
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
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
