"""Writing checkpoints into Ferry's SQLite layout: `put`, `put_writes` and started calls.

A step's checkpoint and metadata are one value (`ferry_steps`); a task's writes at a
checkpoint are one row of packed records (`ferry_writes`). A checkpoint put here also gets its
messages' history folded from memory when it can be (`graph.storage.history.held`), its
thread's summary row in the same transaction, and, past `PART` new messages, a stored part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint, CheckpointMetadata

from graph.storage.history.messages import Key
from graph.storage.internals import (
    SNAPSHOT_COUNTERS,
    DeltaSnapshot,
    snapshot_value,
    superstep_snapshot_bound,
)
from graph.storage.sqlite import histories, layout, reading, summaries
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, Record, key_of
from graph.storage.sqlite.schema import FORGET_START, RECORD_START

if TYPE_CHECKING:
    from graph.storage.sqlite.saver import FerrySaver

_PUT_STEP = "INSERT OR REPLACE INTO ferry_steps VALUES (?, ?, ?, ?, ?, ?, ?, NULL)"
_ADD_WRITES = "INSERT INTO ferry_writes VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
_TASK = "WHERE thread = ? AND ns = ? AND id = ? AND task = ?"


def put(
    saver: FerrySaver, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
) -> RunnableConfig:
    """Save a checkpoint, and with it the thread's summary row."""
    configurable = config["configurable"]
    thread_id, namespace = str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")
    parent = configurable.get("checkpoint_id")
    key = (thread_id, namespace, checkpoint["id"])
    held = None
    seed = checkpoint["channel_values"].get(UNBOUNDED_CHANNEL)
    if parent and seed is None:
        held = saver.steps.fold((thread_id, namespace, parent), key, saver.fold)  # no lock
    elif parent and isinstance(seed, DeltaSnapshot) and _forced_by_supersteps(saver, config):
        held = saver.steps.fold((thread_id, namespace, parent), key, saver.fold)
        if held is not None and held == snapshot_value(seed):  # what replaying the writes gives
            values = dict(checkpoint["channel_values"])
            del values[UNBOUNDED_CHANNEL]
            checkpoint = {**checkpoint, "channel_values": values}
        else:  # an Overwrite, or a branch: the snapshot is the history, stored as given
            held = None
    stored = {k: v for k, v in checkpoint.items() if k != "id"}
    type_tag, value = saver.serde.dumps_typed([stored, layout.stored_metadata(config, metadata)])
    snapshot = int(UNBOUNDED_CHANNEL in checkpoint["channel_values"])
    saved: RunnableConfig = {
        "configurable": {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": namespace,
            "checkpoint_id": checkpoint["id"],
        }
    }
    with saver.cursor() as cur:
        number = saver.file.numbered(cur, thread_id)
        cur.execute(
            _PUT_STEP,
            (number, namespace, key_of(checkpoint["id"]), parent and key_of(parent), snapshot,
             layout.code_of(type_tag), value),
        )  # fmt: skip
        saver.steps.put_here(key)
        # In the same transaction: one commit a step. It reads the new checkpoint's
        # history, which the fold has normally just made.
        summaries.after_put(saver, saved, checkpoint)
    if held is not None:  # after the commit: the file's write lock is not held meanwhile
        histories.keep_parts(saver, number, key, held)
    return saved


def put_writes(
    saver: FerrySaver,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> None:
    """Store a task's writes at a checkpoint, as LangGraph's savers would.

    A write already stored at the same index is kept, unless every write given is one of
    LangGraph's special ones (an error, an interrupt, a resume value), which replace.
    """
    configurable = config["configurable"]
    replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
    new: list[Record] = [
        (WRITES_IDX_MAP.get(channel, idx), channel, *saver.serde.dumps_typed(value))
        for idx, (channel, value) in enumerate(writes)
    ]
    with saver.cursor() as cur:
        number = saver.file.numbered(cur, str(configurable["thread_id"]))
        key = (
            number,
            configurable.get("checkpoint_ns", ""),
            key_of(str(configurable["checkpoint_id"])),
            key_of(task_id),
        )
        cur.execute(_ADD_WRITES, (*key, task_path, layout.packed(layout.merged([], new, replace))))
        if cur.rowcount == 1:
            saver.steps.writes_put(step_key(config), task_id, task_path, writes)
            return
        saver.steps.writes_unknown(step_key(config))  # the file has the whole story
        cur.execute(f"SELECT records FROM ferry_writes {_TASK}", key)
        stored = layout.unpacked(cur.fetchone()[0])
        cur.execute(
            f"UPDATE ferry_writes SET task_path = ?, records = ? {_TASK}",
            (task_path, layout.packed(layout.merged(stored, new, replace)), *key),
        )


def first_start(saver: FerrySaver, thread_id: str, tool_call_id: str) -> bool:
    """Record that a call is starting; False if it had started before."""
    with saver.cursor() as cur:
        cur.execute(RECORD_START, (thread_id, tool_call_id))
        return bool(cur.rowcount == 1)


def forget_start(saver: FerrySaver, thread_id: str, tool_call_id: str) -> None:
    """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
    with saver.cursor() as cur:
        cur.execute(FORGET_START, (thread_id, tool_call_id))


def step_key(config: RunnableConfig) -> Key:
    """(thread_id, checkpoint_ns, checkpoint_id) of the checkpoint `config` names."""
    configurable = config["configurable"]
    return (
        str(configurable["thread_id"]),
        configurable.get("checkpoint_ns", ""),
        str(configurable["checkpoint_id"]),
    )


def _forced_by_supersteps(saver: FerrySaver, config: RunnableConfig) -> bool:
    """Whether LangGraph snapshots `messages` here only because of its superstep bound.

    That snapshot is the whole history again every few thousand supersteps (storage would grow
    with the square of a thread); one a channel asks for (its `snapshot_frequency`) is kept as
    given. Read from the parent's counters, as LangGraph decided from them.
    """
    parent = reading.get_tuple(saver, config)
    counters = (parent.metadata if parent else {}).get(SNAPSHOT_COUNTERS) or {}
    counted = counters.get(UNBOUNDED_CHANNEL) if isinstance(counters, dict) else None
    if not isinstance(counted, list | tuple) or len(counted) != 2:
        return False
    return int(counted[1]) + 1 >= superstep_snapshot_bound()
