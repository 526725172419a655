"""Every private or beta LangGraph interface Ferry's storage relies on, and only here.

Ferry stores messages in a `DeltaChannel` (beta) and rebuilds them faster than LangGraph's
generic walk, which needs a few of LangGraph's internals. They are re-exported from this one
module, each with what it is and why Ferry needs it, so an upgrade that moves one breaks here
and in `tests/unit/test_langgraph_internals.py` (one contract test per item), nowhere else.
The versions these are tested with are pinned in pyproject.toml.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

# Two `configurable` keys under which LangGraph hands each task (private constants of
# `langgraph._internal`):
# - CONFIG_KEY_CHECKPOINTER, its run's checkpointer. The graph `langgraph.json` serves is
#   compiled without one and the server supplies its own per run, so a node finds the saver
#   that records started calls only here (`run_checkpointer`).
# - CONFIG_KEY_READ_STATE, a function reading the graph state as the task's node would get it
#   from an edge (what `ToolNode` reads for `InjectedState`). A task sent with `Send` gets only
#   its packet: `execute_tool` reads the thread here to check that `check` released its call.
from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_READ_STATE
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
# range query and from its saved histories, and hands them over in the stock saver's row shape
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
    "snapshot_value",
    "task_state",
]

SNAPSHOT_COUNTERS = "counters_since_delta_snapshot"
"""Checkpoint metadata key (beta) counting each delta channel's updates since its last snapshot.

LangGraph drops a channel's entry when it takes a snapshot: moving an old file's rows, Ferry
flags the checkpoints without one as those that may hold the messages themselves. Its saver
stores the `messages` superstep count as 0 (`graph.storage.sqlite.layout.stored_metadata`).
"""


def snapshot_value(seed: Any) -> list[Any]:
    """The list a history's seed stands for: a snapshot's value, a plain list, or nothing."""
    if isinstance(seed, DeltaSnapshot):
        return list(seed.value)
    return list(seed or [])


def run_checkpointer(config: RunnableConfig) -> Any:
    """The checkpointer of the run a node's `config` belongs to, or None (private key)."""
    return config.get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER)


def task_state(config: RunnableConfig) -> Any:
    """The graph state as the running task's node reads it (private key); {} outside a run."""
    read = config.get("configurable", {}).get(CONFIG_KEY_READ_STATE)
    return read() if read is not None else {}
