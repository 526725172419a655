"""What a `FerrySaver` does to its file before the first read or write: Ferry's tables, ready.

Kept apart from the saver so the steps a file goes through when it is opened (its tables, the
rows of an older layout) are read in one place.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from graph.storage.sqlite import layout, migration
from graph.storage.sqlite.schema import FERRY_TABLES


def prepared(conn: sqlite3.Connection, serde: Any) -> sqlite3.Connection:
    """`conn` with Ferry's tables and any rows of LangGraph's moved into them.

    A read-only file from before Ferry's layout is read from a copy in memory, which is returned
    instead (and refuses writes: a turn written to it would be lost at exit).
    """
    try:
        for statement in (*layout.TABLES, *FERRY_TABLES):
            conn.execute(statement)
        conn.commit()
    except sqlite3.OperationalError:  # read-only
        if not migration.has_table(conn, "ferry_steps"):
            copy = migration.in_memory(conn)  # from before this layout: a copy
            migration.move_langgraph_rows(copy, serde)
            copy.execute("PRAGMA query_only = ON")
            return copy
    migration.move_langgraph_rows(conn, serde)
    return conn
