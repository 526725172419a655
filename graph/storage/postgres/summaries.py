"""The Postgres side of the threads' summary rows (`graph.storage.threads.summaries`).

The sync saver rewrites a thread's row as it puts a checkpoint on its main namespace; the
async one, the server's, leaves its threads to be summarised by the next listing.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint

from graph.storage.internals import postgres_cursor
from graph.storage.threads.reading import summary_after_put
from graph.storage.threads.summaries import SAVE_POSTGRES, Row, listing_rows

log = logging.getLogger("ferry.saver")


def after_put(saver: Any, saved: RunnableConfig, checkpoint: Checkpoint) -> None:
    """Write the thread's summary row, as its checkpoint was put (main namespace only)."""
    if (row := summary_after_put(saver, saved, checkpoint)) is not None:
        saver.save_summary(row)


def listing(saver: Any) -> list[tuple[Any, ...]]:
    """Each thread's listing row (`graph.storage.threads.summaries.LISTING`)."""
    with postgres_cursor(saver) as cur:
        return listing_rows(cur)


def save(saver: Any, row: Row) -> None:
    """Write a thread's summary row; nothing if the database may not be written."""
    try:
        with postgres_cursor(saver) as cur:
            cur.execute(SAVE_POSTGRES, row)
    except psycopg.Error as error:
        log.debug("summary of %s not kept: %s", row[0], error)
