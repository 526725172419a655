"""The SQLite side of the threads' summary rows (`graph.storage.threads.summaries`).

Every checkpoint put on a thread's main namespace rewrites the thread's row. The history it
counts is the one the saver keeps for the next step anyway, so the row costs the fold of one
step's writes, and one small write, in the same transaction as the checkpoint. A row names
its checkpoint as `ferry_steps` stores the id (`graph.storage.sqlite.layout.key_of`).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint

from graph.storage.sqlite.layout import key_of
from graph.storage.threads.reading import row_from, summary_after_put
from graph.storage.threads.summaries import LISTING_SQLITE, SAVE_SQLITE, Row

if TYPE_CHECKING:
    from graph.storage.sqlite.saver import FerrySaver

log = logging.getLogger("ferry.saver")


def after_put(saver: FerrySaver, saved: RunnableConfig, checkpoint: Checkpoint) -> None:
    """Write the thread's summary row (main namespace), as its checkpoint was put."""
    if saved["configurable"].get("checkpoint_ns"):
        return
    known = saver.remembered_history(saved)
    if known is not None:  # the usual case: nothing to read, nothing to copy
        row: Row | None = row_from(saver.serde, saved, checkpoint, known)
    else:
        row = summary_after_put(saver, saved, checkpoint)
    if row is not None:
        saver.save_summary(row)


def listing(saver: FerrySaver) -> list[tuple[Any, ...]]:
    """Each thread's listing row (`graph.storage.threads.summaries.LISTING_SQLITE`)."""
    with saver.cursor(transaction=False) as cur:
        return [tuple(row) for row in cur.execute(LISTING_SQLITE).fetchall()]


def save(saver: FerrySaver, row: Row) -> None:
    """Write a thread's summary row; nothing if the file may not be written."""
    thread_id, checkpoint_id, *rest = row
    try:
        with saver.cursor() as cur:
            cur.execute(SAVE_SQLITE, (thread_id, key_of(checkpoint_id), *rest))
    except sqlite3.OperationalError as error:
        log.debug("summary of %s not kept: %s", thread_id, error)
