"""What a checkpoint row stores besides the checkpoint: its metadata, kept short.

A turn of Ferry's loop puts a dozen checkpoints, so a few bytes of a row's metadata are a few
hundred bytes a turn. The metadata stays the JSON LangGraph writes (its filters and Ferry's
ancestor walk read it with `json_extract`), spelled without spaces. One counter is stored as
zero: the supersteps since the last snapshot of `messages`. LangGraph snapshots a delta
channel once that count reaches 5000 (`DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`), to bound how far
a read replays; each snapshot is the whole history again (2.9 MB at 1000 bench turns, taken
every ~380 turns, so storage grew with the square of the thread). Ferry's saved histories
(`ferry_histories`) bound the replay instead. Every other counter, and every snapshot that
LangGraph takes for another reason (new input over an unfinished step, `update_state`), is
kept as it is.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from graph.storage.internals import SNAPSHOT_COUNTERS

PUT_CHECKPOINT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
UNBOUNDED_CHANNEL = "messages"
"""The delta channel whose replay Ferry's saved histories bound (`graph.state`)."""


def stored_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> bytes:
    """A checkpoint's metadata as stored: LangGraph's JSON, compact, without the superstep bound."""
    values: dict[str, Any] = dict(get_checkpoint_metadata(config, metadata))
    counters = values.get(SNAPSHOT_COUNTERS)
    if isinstance(counters, dict):
        counted = counters.get(UNBOUNDED_CHANNEL)
        if isinstance(counted, list | tuple) and len(counted) == 2:
            # (updates, supersteps): the updates still count towards the channel's own cadence.
            values[SNAPSHOT_COUNTERS] = {**counters, UNBOUNDED_CHANNEL: [counted[0], 0]}
    text = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "ignore")


def checkpoint_row(
    serde: Any, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
) -> tuple[Any, ...]:
    """The `checkpoints` row LangGraph's savers would write, with `stored_metadata`."""
    type_tag, blob = serde.dumps_typed(checkpoint)
    return (
        str(config["configurable"]["thread_id"]),
        config["configurable"]["checkpoint_ns"],
        checkpoint["id"],
        config["configurable"].get("checkpoint_id"),
        type_tag,
        blob,
        stored_metadata(config, metadata),
    )


def saved_config(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
    """What `put` returns: the config of the checkpoint just saved."""
    return {
        "configurable": {
            "thread_id": config["configurable"]["thread_id"],
            "checkpoint_ns": config["configurable"]["checkpoint_ns"],
            "checkpoint_id": checkpoint["id"],
        }
    }


class CompactCheckpoints(SqliteSaver):
    """LangGraph's SQLite saver, storing each checkpoint's metadata as `stored_metadata` says."""

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint (LangGraph's `SqliteSaver.put`, with compact metadata)."""
        row = checkpoint_row(self.serde, config, checkpoint, metadata)
        saved = saved_config(config, checkpoint)
        with self.cursor() as cur:
            cur.execute(PUT_CHECKPOINT, row)
            # Committed first: the file's write lock is not held while `alongside_put` reads.
            self.conn.commit()
            self.alongside_put(saved, checkpoint)
        return saved

    def alongside_put(self, saved: RunnableConfig, checkpoint: Checkpoint) -> None:
        """Write what goes with a saved checkpoint, under the same hold of the saver's lock."""


class CompactCheckpointsAsync(AsyncSqliteSaver):
    """LangGraph's async SQLite saver (the server's), with compact metadata likewise."""

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint (LangGraph's `AsyncSqliteSaver.aput`, with compact metadata)."""
        await self.setup()
        row = checkpoint_row(self.serde, config, checkpoint, metadata)
        async with self.lock, self.conn.execute(PUT_CHECKPOINT, row):
            await self.conn.commit()
        return saved_config(config, checkpoint)
