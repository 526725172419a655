"""The SQLite side of the threads' summary rows (`graph.storage.summaries`).

Mixed into `FerrySaver` before LangGraph's saver: every checkpoint put on a thread's main
namespace rewrites the thread's row. The history it counts is the one the saver keeps for the
next step anyway, so the row costs the fold of one step's writes, and one small write, made
under the same hold of the saver's lock as the checkpoint (threads sharing a saver wait their
turn once per put, not three times). The checkpoint is committed first, so the file's write
lock is not held while the history is rebuilt (other processes would wait for it).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint

from graph.storage.checkpoint_rows import CompactCheckpoints
from graph.storage.summaries import SAVE_SQLITE, Row, listing_rows
from graph.storage.threads import summary_after_put

log = logging.getLogger("ferry.saver")


class SummarisesThreads(CompactCheckpoints):
    """A SQLite saver that keeps each thread's summary row as it puts its checkpoints."""

    _cursor_thread: int | None = None  # the thread inside `cursor`, while one is
    _outer_commits = False  # whether that outermost cursor commits when it closes

    def alongside_put(self, saved: RunnableConfig, checkpoint: Checkpoint) -> None:
        """Write the thread's summary row (main namespace), as its checkpoint was put."""
        if (row := summary_after_put(self, saved, checkpoint)) is not None:
            self.save_summary(row)

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """LangGraph's cursor; inside one this thread holds, a cursor in the same transaction."""
        if self._cursor_thread != threading.get_ident():
            with super().cursor(transaction) as cur:
                self._cursor_thread, self._outer_commits = threading.get_ident(), transaction
                try:
                    yield cur
                finally:
                    self._cursor_thread = None
            return
        cur = self.conn.cursor()  # the lock is this thread's already (it may not be reentrant)
        try:
            yield cur
        finally:
            if transaction and not self._outer_commits:
                self.conn.commit()
            cur.close()

    def thread_summaries(self) -> list[tuple[Any, ...]]:
        """Each thread's listing row (`graph.storage.summaries.LISTING`)."""
        with self.cursor(transaction=False) as cur:
            return listing_rows(cur, has_table=has_summaries(cur))

    def save_summary(self, row: Row) -> None:
        """Write a thread's summary row; nothing if the file may not be written."""
        try:
            with self.cursor() as cur:
                cur.execute(SAVE_SQLITE, row)
        except sqlite3.OperationalError as error:
            log.debug("summary of %s not kept: %s", row[0], error)


def has_summaries(cur: sqlite3.Cursor) -> bool:
    """Whether the file has the summaries table."""
    cur.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ferry_thread_summaries'"
    )
    return cur.fetchone() is not None
