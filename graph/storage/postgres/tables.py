"""The statements Ferry's Postgres savers run on whole threads, beside LangGraph's own."""

from __future__ import annotations

from graph.storage.threads.summaries import DELETE_POSTGRES

RECORD_START = "INSERT INTO ferry_started_calls VALUES (%s, %s) ON CONFLICT DO NOTHING"
"""Record a tool call as started (nothing if it already was)."""
FORGET_START = "DELETE FROM ferry_started_calls WHERE thread_id = %s AND tool_call_id = %s"
"""Forget that a call started: it paused in `interrupt()`, and runs again when resumed."""
THREAD_IDS = "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = ''"
"""Ids of the threads with checkpoints on their main namespace."""
TABLES = (
    *("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
    *("ferry_started_calls", "ferry_histories", "ferry_history_parts", "ferry_thread_summaries"),
)
"""LangGraph's tables and Ferry's: what the threads take on disk."""
STORED_BYTES = (
    "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) AS size FROM unnest(ARRAY["
    + ", ".join(f"'{table}'" for table in TABLES)
    + "]::text[]) AS t"
)
"""Disk space the tables take, with their indexes and TOAST data."""
DELETE_FERRY_ROWS = (
    "DELETE FROM ferry_started_calls WHERE thread_id = %s",
    "DELETE FROM ferry_histories WHERE thread_id = %s",
    "DELETE FROM ferry_history_parts WHERE thread_id = %s",
    DELETE_POSTGRES,
)
"""Ferry's own rows of a thread, deleted with its checkpoints."""
