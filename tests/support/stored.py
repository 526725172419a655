"""What a Ferry SQLite file holds, read straight from its tables (`graph.storage.sqlite.layout`).

Tests that check what reached the database (a secret, a tool result written while siblings
still ran, a planted row) read it here rather than through the graph's state.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from graph.storage.sqlite import layout

Value = tuple[str, bytes]
"""A stored value: its type tag and bytes, as the serializer reads them."""


def step_values(conn: sqlite3.Connection) -> list[tuple[Value, str | None]]:
    """Every checkpoint's stored value, with the metadata text of a row moved from LangGraph's."""
    rows = conn.execute("SELECT type, value, metadata FROM ferry_steps").fetchall()
    return [((layout.name_of(t), v), metadata) for t, v, metadata in rows]


def write_records(
    conn: sqlite3.Connection, thread_id: str | None = None, channel: str | None = None
) -> list[tuple[str, layout.Record]]:
    """Every stored write (of one thread, on one channel, if given), with its thread id."""
    query = (
        "SELECT t.thread_id, w.records FROM ferry_writes AS w "
        "JOIN ferry_threads AS t ON t.id = w.thread"
    )
    params: tuple[Any, ...] = ()
    if thread_id is not None:
        query += " WHERE t.thread_id = ?"
        params = (thread_id,)
    found = []
    for owner, records in conn.execute(query, params).fetchall():
        for record in layout.unpacked(records):
            if channel is None or record[1] == channel:
                found.append((owner, record))
    return found


def write_values(
    conn: sqlite3.Connection, thread_id: str | None = None, channel: str | None = None
) -> list[Value]:
    """The (type, bytes) of every stored write, as `write_records` selects them."""
    return [(record[2], record[3]) for _, record in write_records(conn, thread_id, channel)]


# --- planting: what someone who can write the file might store (the caller commits) ---------


def thread_number(conn: sqlite3.Connection, thread_id: str) -> int:
    """The number a thread's rows are stored under (`ferry_threads`)."""
    row = conn.execute("SELECT id FROM ferry_threads WHERE thread_id = ?", (thread_id,)).fetchone()
    assert row is not None, f"no thread {thread_id} in the file"
    return int(row[0])


_LATEST_STEP = (
    "WHERE thread = ? AND ns = '' AND id = "
    "(SELECT max(id) FROM ferry_steps WHERE thread = ? AND ns = '')"
)


def plant_step(conn: sqlite3.Connection, thread_id: str, value: Value) -> int:
    """Store `value` as the thread's latest checkpoint (its type as `code_of` stores it).

    Returns how many rows changed.
    """
    number = thread_number(conn, thread_id)
    changed = conn.execute(
        f"UPDATE ferry_steps SET type = ?, value = ? {_LATEST_STEP}",  # noqa: S608 - our own SQL
        (layout.code_of(value[0]), value[1], number, number),
    )
    return int(changed.rowcount)


def plant_step_type(conn: sqlite3.Connection, thread_id: str, stored_type: Any) -> int:
    """Store `stored_type` itself in the `type` column of the thread's latest checkpoint."""
    number = thread_number(conn, thread_id)
    changed = conn.execute(
        f"UPDATE ferry_steps SET type = ? {_LATEST_STEP}",  # noqa: S608 - our own SQL
        (stored_type, number, number),
    )
    return int(changed.rowcount)


def _rows_with(conn: sqlite3.Connection, thread_id: str, channel: str) -> list[tuple[Any, ...]]:
    """The key and records of each of the thread's write rows holding a record on `channel`."""
    rows = conn.execute(
        "SELECT thread, ns, id, task, records FROM ferry_writes WHERE thread = ?",
        (thread_number(conn, thread_id),),
    ).fetchall()
    return [
        (*key, layout.unpacked(records))
        for *key, records in rows
        if any(record[1] == channel for record in layout.unpacked(records))
    ]


def plant_write_values(conn: sqlite3.Connection, thread_id: str, channel: str, value: Value) -> int:
    """Store `value` as every one of the thread's writes on `channel`; how many were replaced."""
    replaced = 0
    for *key, records in _rows_with(conn, thread_id, channel):
        planted = [
            (idx, name, *value) if name == channel else (idx, name, tag, data)
            for idx, name, tag, data in records
        ]
        replaced += sum(record[1] == channel for record in records)
        _store_records(conn, key, layout.packed(planted))
    return replaced


def plant_records(conn: sqlite3.Connection, thread_id: str, channel: str, blob: Any) -> int:
    """Store `blob` as the records of each of the thread's write rows holding `channel` writes.

    Returns how many rows changed.
    """
    rows = _rows_with(conn, thread_id, channel)
    for *key, _ in rows:
        _store_records(conn, key, blob)
    return len(rows)


def _store_records(conn: sqlite3.Connection, key: list[Any], blob: Any) -> None:
    conn.execute(
        "UPDATE ferry_writes SET records = ? WHERE thread = ? AND ns = ? AND id = ? AND task = ?",
        (blob, *key),
    )


def plant_legacy_step(conn: sqlite3.Connection, thread_id: str, value: Value) -> int:
    """Store `value` as the thread's latest checkpoint in LangGraph's `checkpoints` table.

    For a file from before Ferry's layout (`graph.storage.sqlite.migration`), not moved yet.
    """
    changed = conn.execute(
        "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? AND checkpoint_ns = ''"
        " AND checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints"
        " WHERE thread_id = ? AND checkpoint_ns = '')",
        (*value, thread_id, thread_id),
    )
    return int(changed.rowcount)


def plant_legacy_write_values(
    conn: sqlite3.Connection, thread_id: str, channel: str, value: Value
) -> int:
    """Store `value` as every one of the thread's writes on `channel`, in LangGraph's `writes`."""
    changed = conn.execute(
        "UPDATE writes SET type = ?, value = ? WHERE thread_id = ? AND channel = ?",
        (*value, thread_id, channel),
    )
    return int(changed.rowcount)


def part_rows(conn: sqlite3.Connection, thread_id: str) -> list[tuple[int, int]]:
    """The (first, end) of each part stored for a thread (`graph.storage.sqlite.parts`)."""
    return conn.execute(
        "SELECT p.first, p.end FROM ferry_parts AS p JOIN ferry_threads AS t ON t.id = p.thread "
        "WHERE t.thread_id = ? ORDER BY p.end",
        (thread_id,),
    ).fetchall()


def thread_config(thread: str) -> Any:
    """The run config of one thread."""
    return {"configurable": {"thread_id": thread}}


def converse(db: Path, *threads: str) -> None:
    """One short answered turn on each of `threads`, stored in Ferry's SQLite file `db`."""
    from graph import build_graph
    from graph.core.settings import Settings
    from graph.storage import sqlite_saver
    from tests.support.scripted import ScriptedModel, answer

    graph = build_graph(
        model=ScriptedModel([answer(f"hello {t}") for t in threads]), tools=[],
        checkpointer=sqlite_saver(db), settings=Settings(db=db),
    )  # fmt: skip
    for thread in threads:
        graph.invoke({"messages": [("user", f"hi from {thread}")]}, thread_config(thread))
