"""What a `FerrySaver` does to its file before the first read or write: Ferry's tables, ready.

Kept apart from the saver so the steps a file goes through when it is opened (its tables, the
rows of an older layout) are read in one place.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from graph.storage.sqlite import layout_versions, migration


def prepared(conn: sqlite3.Connection, serde: Any) -> sqlite3.Connection:
    """`conn` at this Ferry's layout version, any rows of LangGraph's moved into Ferry's tables.

    A file of a newer layout is refused (`layout_versions`). A read-only file of an older one
    is read from a copy in memory, which is returned instead (and refuses writes: a turn
    written to it would be lost at exit).
    """
    ready = layout_versions.up_to_date(conn, serde)  # newer refused; older migrated
    if ready is not conn:  # read-only, of an older layout: a copy in memory
        migration.move_langgraph_rows(ready, serde)
        ready.execute("PRAGMA query_only = ON")
        return ready
    migration.move_langgraph_rows(conn, serde)
    return conn
