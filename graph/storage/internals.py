"""Every private or beta LangGraph interface Ferry's storage relies on, and only here.

Ferry stores messages in a `DeltaChannel` (beta) and rebuilds them faster than LangGraph's
generic walk, which needs a few of LangGraph's internals. They are re-exported from this one
module, each with what it is and why Ferry needs it, so an upgrade that moves one breaks here
and in `tests/unit/test_langgraph_internals.py` (one contract test per item), nowhere else.
The versions these are tested with are pinned in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

# Two `configurable` keys under which LangGraph hands each task (private constants of
# `langgraph._internal`):
# - CONFIG_KEY_CHECKPOINTER, its run's checkpointer. The graph `langgraph.json` serves is
#   compiled without one and the server supplies its own per run, so a node finds the saver
#   that records started calls only here (`run_checkpointer`).
# - CONFIG_KEY_READ_STATE, a function reading the graph state as the task's node would get it
#   from an edge (what `ToolNode` reads for `InjectedState`). A task sent with `Send` gets only
#   its packet: `execute_tool` reads the thread here to check that `check` released its call.
# And the task ids under which a run stores writes on the checkpoint it starts from: its input
# for a delta channel under uuid5(that checkpoint's id, INPUT), a resume value or a `Command`
# update under NULL_TASK_ID. Deleting a run deletes them too (`run_writes_on_start`).
from langgraph._internal._constants import (
    CONFIG_KEY_CHECKPOINTER,
    CONFIG_KEY_READ_STATE,
    INPUT,
    NULL_TASK_ID,
)
from langgraph.checkpoint.base import DeltaChannelHistory

# The msgpack extension codes of LangGraph's serializer (private constants of `jsonplus`).
# Ferry loads LangGraph's msgpack itself, through an allowlist (graph.storage.codec.allowlist), so
# it must know which code means "constructor with one argument", "pydantic model", and so on.
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
)

# The wrapper a `DeltaChannel` snapshot is stored in (private). A checkpoint whose messages
# are a `DeltaSnapshot` ends the ancestor walk; retention writes one into the oldest kept
# checkpoint so that it no longer needs its ancestors.
from langgraph.checkpoint.serde.types import _DeltaSnapshot as DeltaSnapshot

# Turns stored writes into a channel's history, exactly as the stock SQLite saver does (private
# helper of langgraph-checkpoint-sqlite): Ferry's Postgres saver reads the rows itself, with one
# range query and from its stored histories, and hands them over in the stock saver's row shape
# `(checkpoint_id, channel, task_id, idx, type, value, task_path)`.
from langgraph.checkpoint.sqlite._delta import build_delta_channels_writes_history

__all__ = [
    "EXT_CONSTRUCTOR_KW_ARGS",
    "EXT_CONSTRUCTOR_POS_ARGS",
    "EXT_CONSTRUCTOR_SINGLE_ARG",
    "EXT_DELTA_SNAPSHOT",
    "EXT_METHOD_SINGLE_ARG",
    "EXT_PYDANTIC_V2",
    "SNAPSHOT_COUNTERS",
    "CONFIG_KEY_CHECKPOINTER",
    "CONFIG_KEY_READ_STATE",
    "DeltaChannelHistory",
    "DeltaSnapshot",
    "build_delta_channels_writes_history",
    "run_checkpointer",
    "run_writes_on_start",
    "snapshot_value",
    "task_state",
    "LANGGRAPH_POSTGRES_COLUMNS",
    "postgres_cursor",
    "postgres_select_sql",
    "saver_loop",
    "stock_next_version",
    "superstep_snapshot_bound",
]

SNAPSHOT_COUNTERS = "counters_since_delta_snapshot"
"""Checkpoint metadata key (beta) counting each delta channel's updates since its last snapshot.

LangGraph drops a channel's entry when it takes a snapshot: moving an old file's rows, Ferry
flags the checkpoints without one as those that may hold the messages themselves. Stored as
put; files of earlier releases hold the `messages` superstep count as 0.
"""


def superstep_snapshot_bound() -> int:
    """Supersteps after which LangGraph snapshots a delta channel whatever its own frequency.

    One process-wide value (5000 unless `LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT` is set
    before LangGraph is imported), read at each call from the private module that decides
    (`langgraph.pregel._checkpoint`), as it reads it. A snapshot it forces is the whole history
    again, which Ferry's SQLite saver declines when replaying the writes gives the same list
    (`graph.storage.sqlite.saver`).
    """
    from langgraph.pregel import _checkpoint

    return int(vars(_checkpoint)["DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT"])


def snapshot_value(seed: Any) -> list[Any]:
    """The list a history's seed stands for: a snapshot's value, a plain list, or nothing."""
    if isinstance(seed, DeltaSnapshot):
        return list(seed.value)
    return list(seed or [])


def run_checkpointer(config: RunnableConfig) -> Any:
    """The checkpointer of the run a node's `config` belongs to, or None (private key)."""
    return config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)


def run_writes_on_start(checkpoint_id: str) -> list[str]:
    """The task ids of the writes a run puts on the checkpoint it starts from, `checkpoint_id`.

    The input's id is made from the checkpoint's, so the next run from the same checkpoint
    reuses it: a write left there by a deleted run would be kept in place of the new one.
    """
    try:
        return [str(uuid.uuid5(uuid.UUID(checkpoint_id), INPUT)), NULL_TASK_ID]
    except ValueError:  # not a UUID: LangGraph stores no input under it
        return [NULL_TASK_ID]


def task_state(config: RunnableConfig) -> Any:
    """The graph state as the running task's node reads it (private key); {} outside a run."""
    read = config.get("configurable", {}).get(CONFIG_KEY_READ_STATE)
    return read() if read is not None else {}


# -- LangGraph's savers, as Ferry's build on them ------------------------------------------------
# Each `langgraph.checkpoint.postgres` import is deferred: Postgres is an optional extra.


def stock_next_version(current: Any) -> str:
    """The version after `current` as LangGraph's `SqliteSaver` numbers it (32 digits, fraction).

    A thread another saver began keeps LangGraph's format in a `FerrySaver`. The method reads
    nothing of its saver, so it is called without one.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver

    return SqliteSaver.get_next_version(cast("SqliteSaver", None), current, None)


def postgres_cursor(saver: Any) -> Any:
    """A cursor on a Postgres saver's connection or pool, under its lock (private `_cursor()`).

    Ferry's statements beside LangGraph's run on it, sync or async (`async with`).
    """
    return saver._cursor()


def saver_loop(saver: Any) -> asyncio.AbstractEventLoop:
    """The event loop an async Postgres saver was made on (`AsyncPostgresSaver.loop`).

    Its sync methods run its async ones there; Ferry's started-call record does the same.
    """
    loop: asyncio.AbstractEventLoop = saver.loop
    return loop


LANGGRAPH_POSTGRES_COLUMNS = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                    "checkpoint"),
    "checkpoint_blobs": ("thread_id", "checkpoint_ns", "channel", "version", "type", "blob"),
    "checkpoint_writes": ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx",
                          "channel", "type", "blob", "task_path"),
}  # fmt: skip
"""LangGraph's Postgres tables and the columns Ferry's own SQL reads (`postgres.stored_histories`,
`threads.summaries`, `postgres.saver`): the ancestor walk, the writes' range query, the snapshot
lookup and the listing. Also relied on: `checkpoints.checkpoint` is JSONB holding
`channel_versions`, a channel's blob is keyed by (thread, namespace, channel, version), and a
blob of type `empty` holds no value."""

_STOCK_BLOBS = """
    (
        select array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])
        from jsonb_each_text(checkpoint -> 'channel_versions')
        inner join checkpoint_blobs bl
            on bl.thread_id = checkpoints.thread_id
            and bl.checkpoint_ns = checkpoints.checkpoint_ns
            and bl.channel = jsonb_each_text.key
            and bl.version = jsonb_each_text.value
    ) as channel_values,"""
_BLOBS_BY_KEY = """
    (
        select array_agg(array[bl.channel::bytea, bl.type::bytea, bl.blob])
        from jsonb_each_text(checkpoint -> 'channel_versions') AS cv
        cross join lateral (
            select b.channel, b.type, b.blob from checkpoint_blobs b
            where b.thread_id = checkpoints.thread_id
                and b.checkpoint_ns = checkpoints.checkpoint_ns
                and b.channel = cv.key
                and b.version = cv.value
            limit 1
        ) AS bl
    ) as channel_values,"""


def postgres_select_sql() -> str:
    """LangGraph's checkpoint query (`SELECT_SQL`) with each channel's blob found by its key.

    Ferry's Postgres savers set it as their class attribute `SELECT_SQL`, which LangGraph's
    `get_tuple` and `list` read the query from (`self.SELECT_SQL`, sync and async alike).
    LangGraph's joins the checkpoint's channel versions to every blob of the thread, which the
    planner runs as a scan of them all (thousands for a long thread) for each checkpoint read.
    Each blob is one primary-key lookup here (LIMIT keeps the LATERAL from being flattened into
    that join); the rows are the same, the key being unique. LangGraph's query as it is if its
    text changed (the contract test says so).
    """
    from langgraph.checkpoint.postgres.base import SELECT_SQL

    return SELECT_SQL.replace(_STOCK_BLOBS, _BLOBS_BY_KEY)
