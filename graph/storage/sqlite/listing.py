"""`ferry threads` on a SQLite file whose summary rows are all current: read with no saver.

Listing a file needs neither LangGraph nor the message classes when every thread's summary row
(`graph.storage.threads.summaries`) describes its newest checkpoint; this module imports only
the standard library and those rows' rules. Any other file is listed by a saver
(`graph.storage.threads.reading.list_threads`), which rebuilds what is missing.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from graph.storage.sqlite.layout_versions import made_by_newer_ferry
from graph.storage.threads.reading import newest_first, nothing_stored
from graph.storage.threads.summaries import LISTING_SQLITE, Summary, summary_of

log = logging.getLogger("ferry.threads")


def listed_from_rows(path: Path) -> list[Summary] | None:
    """What `list_threads` returns for the SQLite file at `path`, read from its rows alone.

    None when a thread needs rebuilding (no current row, a sealed title, a file from before
    the rows) or the file cannot be read so: a saver's `list_threads` does it, and reports why.
    """
    if nothing_stored(path):
        return []  # no file, no threads (and a listing creates none, nor its folder)
    uri = f"{path.absolute().as_uri()}?mode=rw"  # never creates the file; read-only if it is
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
        try:
            if made_by_newer_ferry(conn):
                return None  # the saver refuses it, saying so
            rows = [tuple(row) for row in conn.execute(LISTING_SQLITE).fetchall()]
        finally:
            conn.close()
    except sqlite3.Error as error:
        log.debug("listing %s with a saver: %s", path, error)
        return None
    threads = [summary for row in rows if (summary := summary_of(row)) is not None]
    return newest_first(threads) if len(threads) == len(rows) else None
