"""What a `FerrySaver` does to its file before the first read or write: Ferry's tables, ready.

Kept apart from the saver so the steps a file goes through when it is opened (its tables, its
layout version, the notice about rows in LangGraph's tables) are read in one place.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from graph.storage.sqlite import layout_versions, migration
from graph.storage.sqlite.schema import file_of


def prepared(conn: sqlite3.Connection, serde: Any) -> sqlite3.Connection:
    """`conn` at this Ferry's layout version; rows in LangGraph's tables are left where they are.

    A file of a newer layout is refused (`layout_versions`). A read-only file of an older one
    is read from a copy in memory, which is returned instead (and refuses writes: a turn
    written to it would be lost at exit). Threads in LangGraph's tables are never moved here,
    only reported once (`ferry migrate FILE` converts them: `migration`).
    """
    path = file_of(conn)  # the file's name, before a copy in memory replaces conn
    ready = layout_versions.up_to_date(conn, serde)  # newer refused; older migrated
    # Rows in LangGraph's tables are another saver's, or wait for `ferry migrate`: said, not moved.
    migration.notice(ready, path)
    if ready is not conn:  # read-only, of an older layout: a copy in memory
        ready.execute("PRAGMA query_only = ON")
        return ready
    return conn
