"""The SQLite side of the threads' summary rows (`graph.storage.summaries`).

Mixed into `FerrySaver` before LangGraph's saver: every checkpoint put on a thread's main
namespace rewrites the thread's row. The history it counts is the one the saver keeps for the
next step anyway, so the row costs the fold of one step's writes, and one small write.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.sqlite import SqliteSaver

from graph.storage.summaries import SAVE_SQLITE, Row, listing_rows
from graph.storage.threads import summary_after_put

log = logging.getLogger("ferry.saver")


class SummarisesThreads(SqliteSaver):
    """A SQLite saver that keeps each thread's summary row as it puts its checkpoints."""

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint, then its thread's summary row (for the main namespace)."""
        saved = super().put(config, checkpoint, metadata, new_versions)
        if (row := summary_after_put(self, saved, checkpoint)) is not None:
            self.save_summary(row)
        return saved

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
