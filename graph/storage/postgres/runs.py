"""Deleting a run's checkpoints in Postgres, as the server's `multitask_strategy="rollback"` does.

LangGraph's `checkpoints` table holds each checkpoint's metadata as JSON, so a run's
checkpoints are found by one statement. What the run left on the thread goes with them, as in
SQLite (`graph.storage.sqlite.saver`): its writes, the blobs only its checkpoints name, the
question or resume value it stored on the checkpoint it started from, and Ferry's saved
histories and summary row of its checkpoints (caches, rebuilt on the next read). Tool calls
it started stay recorded as started: their side effects happened.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from graph.storage.internals import run_writes_on_start

DELETE_CHECKPOINTS = (
    "DELETE FROM checkpoints WHERE metadata ->> 'run_id' = ANY(%s::text[]) "
    "RETURNING thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "checkpoint -> 'channel_versions' AS versions"
)
_THREAD = "thread_id = %(thread)s AND checkpoint_ns = %(ns)s"
_WRITES = f"DELETE FROM checkpoint_writes WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)"
# Writes on the checkpoint a deleted run started from, unless another run went on from it.
_START_WRITES = (
    f"DELETE FROM checkpoint_writes WHERE {_THREAD} AND checkpoint_id = %(parent)s "
    "AND task_id = ANY(%(tasks)s) AND NOT EXISTS (SELECT 1 FROM checkpoints c "
    "WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s "
    "AND c.parent_checkpoint_id = %(parent)s)"
)
# A blob is a channel's value at a version; checkpoints that stay may name the same one.
_BLOBS = (
    f"DELETE FROM checkpoint_blobs b WHERE {_THREAD} AND (b.channel, b.version) IN "
    "(SELECT * FROM unnest(%(channels)s::text[], %(versions)s::text[])) AND NOT EXISTS "
    "(SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id "
    "AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint -> 'channel_versions' ->> b.channel "
    "= b.version)"
)
# A saved history at a deleted checkpoint goes, and every part after it (a part continues
# the one before).
_HISTORY_PARTS = (
    f"DELETE FROM ferry_history_parts WHERE {_THREAD} AND (messages >= (SELECT min(messages) "
    f"FROM ferry_history_parts WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)) "
    f"OR EXISTS (SELECT 1 FROM ferry_histories WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)))"
)
_HISTORY = f"DELETE FROM ferry_histories WHERE {_THREAD} AND checkpoint_id = ANY(%(gone)s)"
_SUMMARY = (
    "DELETE FROM ferry_thread_summaries WHERE thread_id = %(thread)s "
    "AND checkpoint_id = ANY(%(gone)s)"
)


def follow_ups(deleted: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The statements that delete what the checkpoints `deleted` (`DELETE_CHECKPOINTS`) left."""
    by_thread: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in deleted:
        by_thread[(row["thread_id"], row["checkpoint_ns"])].append(row)
    for (thread, ns), rows in by_thread.items():
        gone = [row["checkpoint_id"] for row in rows]
        at = {"thread": thread, "ns": ns, "gone": gone}
        yield _WRITES, at
        for parent in {r["parent_checkpoint_id"] for r in rows} - {None, *gone}:
            yield _START_WRITES, {**at, "parent": parent, "tasks": run_writes_on_start(parent)}
        named = {(c, v) for r in rows for c, v in (r["versions"] or {}).items()}
        channels, versions = [c for c, _ in named], [str(v) for _, v in named]
        yield _BLOBS, {**at, "channels": channels, "versions": versions}
        yield _HISTORY_PARTS, at
        yield _HISTORY, at
        if not ns:
            yield _SUMMARY, at


def threads_of(deleted: Sequence[Mapping[str, Any]]) -> set[str]:
    """The threads the deleted checkpoints were on."""
    return {row["thread_id"] for row in deleted}
