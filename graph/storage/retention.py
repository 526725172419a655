"""Retention: drop old checkpoints or whole threads, keeping everything a resume needs."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from graph.storage import FerrySaver
from graph.storage.threads import list_threads

if TYPE_CHECKING:
    from graph.storage import Saver


def _recent_chain(
    saver: FerrySaver, thread_id: str, keep: int
) -> tuple[list[CheckpointTuple], bool]:
    """The thread's newest `keep` checkpoints, newest first, and whether older ones exist."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    chain: list[CheckpointTuple] = []
    current = saver.get_tuple(config)
    while current is not None and len(chain) < keep:
        chain.append(current)
        current = saver.get_tuple(current.parent_config) if current.parent_config else None
    return chain, current is not None


def prune_thread(saver: FerrySaver, thread_id: str, keep: int) -> int:
    """Keep the newest `keep` checkpoints of a thread (its current branch); return how many went.

    Messages are stored as each step's writes, so the oldest kept checkpoint first receives the
    whole history it stands on; it then no longer needs any ancestor. The newest checkpoint and
    its pending writes (what a resume runs from) are always kept.
    """
    chain, has_older = _recent_chain(saver, thread_id, max(keep, 1))
    if not has_older:
        return 0
    oldest = chain[-1]
    history = saver.get_delta_channel_history(config=oldest.config, channels=["messages"])
    checkpoint = dict(oldest.checkpoint)
    checkpoint["channel_values"] = {
        **oldest.checkpoint["channel_values"],
        "messages": _DeltaSnapshot(history["messages"].get("seed") or []),
    }
    type_tag, blob = saver.serde.dumps_typed(checkpoint)
    kept = [c.config["configurable"]["checkpoint_id"] for c in chain]
    marks = ",".join("?" * len(kept))
    with saver.cursor() as cur:
        cur.execute(
            "UPDATE checkpoints SET type = ?, checkpoint = ?, parent_checkpoint_id = NULL "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (type_tag, blob, thread_id, kept[-1]),
        )
        cur.execute(
            f"DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id NOT IN ({marks})",
            (thread_id, *kept),
        )
        removed = int(cur.rowcount)
        for table in ("writes", "ferry_histories"):
            cur.execute(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id NOT IN ({marks})",
                (thread_id, *kept),
            )
    return removed


def threads_updated_before(saver: Saver, cutoff: datetime) -> list[str]:
    """Ids of threads whose last checkpoint is older than `cutoff` (timezone-aware)."""
    return [
        t["thread_id"]
        for t in list_threads(saver)
        if datetime.fromisoformat(t["updated_at"]) < cutoff
    ]


def compact(saver: FerrySaver) -> None:
    """Give freed space back to the file system."""
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    saver.conn.execute("VACUUM")
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
