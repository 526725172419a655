"""Rebuilding a thread's messages from SQLite: the ancestor walk and its one range query.

Messages are stored as the writes of each step (see `graph.state`). Rebuilding them at a
checkpoint means walking its ancestors back to the nearest one whose history is known (held
in memory, saved in `ferry_histories`, or a snapshot LangGraph took), then replaying the
writes since. `graph.storage.sqlite.FerrySaver` calls `replay` and keeps what it rebuilt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage

from graph.storage import saved_parts
from graph.storage.internals import (
    DeltaChannelHistory,
    DeltaSnapshot,
    build_delta_channels_writes_history,
    snapshot_possible_sql,
)

Key = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id)"""

# A checkpoint's ancestors, nearest first, by parent links (ids are not ordered across
# processes), each with whether it may hold a snapshot of the messages. CROSS JOIN keeps each
# step a primary-key lookup.
CHAIN_SQL = (
    "WITH RECURSIVE chain(checkpoint_id, parent_checkpoint_id, may_hold_snapshot) AS ("
    "SELECT checkpoint_id, parent_checkpoint_id, "
    + snapshot_possible_sql("checkpoints")
    + " FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
    "UNION ALL SELECT c.checkpoint_id, c.parent_checkpoint_id, "
    + snapshot_possible_sql("c")
    + " FROM chain a CROSS JOIN checkpoints c ON c.checkpoint_id = a.parent_checkpoint_id "
    "WHERE c.thread_id = ? AND c.checkpoint_ns = ?) "
    "SELECT checkpoint_id, may_hold_snapshot FROM chain"
)
SAVED_AT_SQL = (
    "SELECT checkpoint_id, messages FROM ferry_histories WHERE thread_id = ? AND checkpoint_ns = ?"
)


def are_messages(seed: Any, writes: list[Any]) -> bool:
    """Whether a `messages` history holds messages only: then it is Ferry's message channel.

    Ferry's reducer (`graph.state.fold_messages`) is applied only then: messages, or what a
    caller sends as one (text, a `(role, text)` pair, a message dict). A graph that keeps
    anything else under that name gets LangGraph's generic rebuild, with its own reducer.
    """
    base = seed.value if isinstance(seed, DeltaSnapshot) else (seed or [])
    if not isinstance(base, list) or not all(isinstance(m, BaseMessage) for m in base):
        return False
    items = (item for write in writes for item in (write if isinstance(write, list) else [write]))
    return all(_message_like(item) for item in items)


def _message_like(item: Any) -> bool:
    if isinstance(item, BaseMessage | str):
        return True
    if isinstance(item, dict):
        return "content" in item and ("role" in item or "type" in item)
    return isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)


def replay(
    cur: sqlite3.Cursor,
    serde: Any,
    key: Key,
    remembered: Callable[[Key], list[Any] | None],
    task_path: bool,
    on_saved: Callable[[str, list[Any]], None] | None = None,
) -> tuple[DeltaChannelHistory, int]:
    """The writes since the nearest remembered, saved or snapshot ancestor, and its history.

    Also returns the length of the thread's saved history (0 if none), parts included
    (`graph.storage.saved_parts`); `on_saved` is told the checkpoint and history whenever the
    walk starts from the saved one. The walk reads ids and one metadata field, and opens a
    checkpoint only where LangGraph may have stored a snapshot. A snapshot must be honoured:
    when new input replaces an unfinished step, LangGraph takes one so the abandoned step's
    stored writes are not replayed.
    """
    thread_id, namespace, target = key
    chain: list[str] = []
    walked: set[str] = set()
    seed: Any = None
    blobs = cur.connection.cursor()
    blobs.execute(SAVED_AT_SQL, (thread_id, namespace))
    saved_at, saved_length = blobs.fetchone() or (None, 0)
    newest_part = saved_parts.newest(blobs, thread_id, namespace) if saved_at else None
    # Each part's checkpoint: read only if the walk gets past what this process remembers
    # (a long thread has hundreds of parts; a running one finds its last step remembered).
    part_at: dict[str, int] | None = None
    cur.execute(CHAIN_SQL, (thread_id, namespace, target, thread_id, namespace))
    for checkpoint_id, may_hold_snapshot in cur:
        if checkpoint_id == target and not walked:
            walked.add(checkpoint_id)  # its own writes belong to the next step
            continue
        if checkpoint_id in walked:
            break  # a re-put checkpoint made the chain loop
        walked.add(checkpoint_id)
        chain.append(checkpoint_id)
        ancestor = (thread_id, namespace, checkpoint_id)
        seed = remembered(ancestor)
        if seed is None and part_at is None:
            part_at = _part_points(blobs, thread_id, namespace) if newest_part else {}
        if (
            seed is None
            and part_at is not None
            and (checkpoint_id == saved_at or checkpoint_id in part_at)
        ):
            base = (thread_id, namespace, str(saved_at))  # parts are read only after a base
            seed = _saved(blobs, serde, base, part_at.get(checkpoint_id))
            if seed is not None and on_saved is not None:
                on_saved(checkpoint_id, seed)
        if seed is None and may_hold_snapshot:
            seed = _stored_messages(blobs, serde, ancestor)
        if seed is not None:
            break
    rows = _message_writes(blobs, thread_id, namespace, chain, task_path) if chain else []
    history = build_delta_channels_writes_history(
        channels=["messages"], chain_by_ch={"messages": chain},
        seed_val_by_ch={"messages": seed}, seeded=set() if seed is None else {"messages"},
        stage2_rows=rows, serde=serde,
    )["messages"]  # fmt: skip
    return history, saved_length if newest_part is None else newest_part


def _part_points(cur: sqlite3.Cursor, thread_id: str, namespace: str) -> dict[str, int]:
    """Each saved part's checkpoint, with the saved history's length there."""
    return {
        checkpoint_id: length
        for length, checkpoint_id in saved_parts.points(cur, thread_id, namespace)
    }


def _saved(cur: sqlite3.Cursor, serde: Any, base_key: Key, upto: int | None) -> list[Any] | None:
    """The saved history: the base (at `base_key`), and its parts up to length `upto`."""
    base = _decoded(cur, serde, "SELECT type, value FROM ferry_histories", base_key)
    if not isinstance(base, list):
        return None
    if upto is None:
        return base
    return saved_parts.joined(cur, serde, base_key[0], base_key[1], base, upto)


def _message_writes(
    cur: sqlite3.Cursor, thread_id: str, namespace: str, chain: list[str], task_path: bool
) -> list[Any]:
    """The `messages` writes stored at the checkpoints in `chain` (LangGraph's stage-2 rows).

    One range of the primary key holds them all: the rows between the chain's smallest and
    largest ids (a branch forked off the chain may have rows in between; they are left out).
    """
    path = "task_path" if task_path else "''"
    cur.execute(
        f"SELECT checkpoint_id, channel, task_id, idx, type, value, {path} FROM writes "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id BETWEEN ? AND ? "
        "AND channel = 'messages'",
        (thread_id, namespace, min(chain), max(chain)),
    )
    wanted = set(chain)
    return [row for row in cur if row[0] in wanted]


def _stored_messages(cur: sqlite3.Cursor, serde: Any, key: Key) -> Any:
    """The messages a checkpoint stores itself (a snapshot), or None."""
    checkpoint = _decoded(cur, serde, "SELECT type, checkpoint FROM checkpoints", key) or {}
    return checkpoint.get("channel_values", {}).get("messages")


def _decoded(cur: sqlite3.Cursor, serde: Any, select: str, key: Key) -> Any:
    """The (type, value) a query selects for one checkpoint of a thread, decoded; or None."""
    cur.execute(f"{select} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", key)
    row = cur.fetchone()
    return serde.loads_typed((row[0], row[1])) if row else None
