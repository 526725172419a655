"""Retention: drop old checkpoints or whole threads, keeping everything a resume needs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from graph.storage.internals import DeltaSnapshot, snapshot_value

if TYPE_CHECKING:
    from graph.storage.sqlite.saver import FerrySaver


def _recent_chain(
    saver: FerrySaver, thread_id: str, namespace: str, keep: int
) -> tuple[list[CheckpointTuple], bool]:
    """The newest `keep` checkpoints of a namespace, newest first, and whether older ones exist."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}}
    chain: list[CheckpointTuple] = []
    current = saver.get_tuple(config)
    while current is not None and len(chain) < keep:
        chain.append(current)
        current = saver.get_tuple(current.parent_config) if current.parent_config else None
    return chain, current is not None


def prune_thread(saver: FerrySaver, thread_id: str, keep: int, namespace: str = "") -> int:
    """Keep the newest `keep` checkpoints of a thread (its current branch); return how many went.

    Messages are stored as each step's writes, so the oldest kept checkpoint first receives the
    whole history it stands on; it then no longer needs any ancestor. The newest checkpoint and
    its pending writes (what a resume runs from) are always kept. Only `namespace` is pruned.
    """
    chain, has_older = _recent_chain(saver, thread_id, namespace, max(keep, 1))
    if not has_older:
        return 0
    kept = [c.config["configurable"]["checkpoint_id"] for c in chain]
    return saver.keep_only(chain[-1].config, kept, _standing_alone(saver, chain[-1]))


def _standing_alone(saver: FerrySaver, oldest: CheckpointTuple) -> dict[str, Any]:
    """The oldest kept checkpoint with the messages it stands on stored in it (if it has any)."""
    checkpoint = dict(oldest.checkpoint)
    values = oldest.checkpoint["channel_values"]
    if "messages" in oldest.checkpoint["channel_versions"] and "messages" not in values:
        history = saver.get_delta_channel_history(config=oldest.config, channels=["messages"])
        entry = history["messages"]
        messages = snapshot_value(entry.get("seed"))
        if entry["writes"]:  # not folded by Ferry: only the graph's own reducer could
            thread_id = oldest.config["configurable"]["thread_id"]
            raise ValueError(f"thread {thread_id}: its messages are not Ferry's; not pruned")
        checkpoint["channel_values"] = {**values, "messages": DeltaSnapshot(messages)}
    return checkpoint


def prune_threads(saver: FerrySaver, thread_ids: Sequence[str], *, strategy: str) -> None:
    """`BaseCheckpointSaver.prune`: keep each namespace's latest checkpoint, or delete all."""
    for thread_id in map(str, thread_ids):
        if strategy in ("delete", "delete_all"):
            saver.delete_thread(thread_id)
            continue
        if strategy != "keep_latest":
            raise ValueError(f"unknown prune strategy {strategy!r}")
        for namespace in saver.namespaces(thread_id):
            prune_thread(saver, thread_id, keep=1, namespace=namespace)


def stored_bytes(path: Path | None) -> int:
    """The size of the file at `path` and of its write-ahead log; 0 in memory."""
    if path is None:
        return 0
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def compact(saver: FerrySaver) -> None:
    """Give freed space back to the file system."""
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    saver.conn.execute("VACUUM")
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
