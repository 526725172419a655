"""Whose a thread in LangGraph's tables is: Ferry's graph's, or another application's.

`ferry migrate` moves Ferry's threads only, unless asked for others, so a file that LangGraph's
docs had two applications share keeps the other application's threads where it reads them. The
rule looks at the checkpoint itself, never at the thread's id: a thread is Ferry's when its
newest checkpoint on the main namespace that can be read has, beside LangGraph's own names
(`__start__`, `__pregel_tasks`, `__interrupt__`, …), only channels of Ferry's graph
(`graph.state.FerryState`'s fields and `branch:to:<node>` for Ferry's nodes),
`branch:to:call_model` among them, and has been seen by Ferry's nodes alone.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from graph.storage.codec.reads import StoredValueError

# Spelled out rather than read from the agent (storage imports none of it); a test checks both
# against the compiled graph (tests/unit/test_stock_saver.py).
FERRY_NODES = ("call_model", "check", "execute_tool")
"""The nodes of Ferry's graph (`graph.builder`)."""
FERRY_CHANNELS = frozenset(
    {"messages", "stop_reason", "tool_failures", "released_calls", "summary"}  # `FerryState`
    | {"structured_response", "answer_schema"}
    | {f"branch:to:{node}" for node in FERRY_NODES}
)
"""Every channel of Ferry's graph a checkpoint may have versions for, beside LangGraph's own."""
_ENTRY = "branch:to:call_model"  # every step after the input has it: the first node's trigger


def _own(names: object) -> set[str]:
    """The names a graph chose: LangGraph's own (`__start__`, `__interrupt__`, …) left out."""
    found = names if isinstance(names, dict) else {}
    return {n for n in found if not (str(n).startswith("__") and str(n).endswith("__"))}


def whose(checkpoint: Any) -> str | None:
    """None if `checkpoint` is one of Ferry's graph's, else why not (one short phrase)."""
    if not isinstance(checkpoint, dict):
        return "its newest checkpoint is not a checkpoint"
    channels = _own(checkpoint.get("channel_versions")) - {"__pregel_tasks"}
    if foreign := sorted(channels - FERRY_CHANNELS):
        return f"another graph's channels ({', '.join(foreign[:3])})"
    nodes = _own(checkpoint.get("versions_seen"))
    if foreign := sorted(nodes - set(FERRY_NODES)):
        return f"another graph's nodes ({', '.join(foreign[:3])})"
    if _ENTRY not in channels:
        return "no step of Ferry's graph yet (only its input)"
    return None


def not_ferrys(conn: sqlite3.Connection, serde: Any, thread_id: str) -> str | None:
    """None if the thread is Ferry's (the module's rule), else why it is not."""
    rows = conn.execute(
        "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
        "ORDER BY checkpoint_id DESC",
        (thread_id,),
    )
    for type_tag, blob in rows:
        try:
            return whose(serde.loads_typed((type_tag, blob)))
        except StoredValueError:
            continue  # a row that cannot be read (refused, sealed): the one before decides
    return "no checkpoint on its main namespace can be read"
