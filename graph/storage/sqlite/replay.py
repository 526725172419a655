"""Rebuilding a thread's messages from SQLite: the ancestor walk and its one range query.

Messages are stored as the writes of each step (see `graph.state`). Rebuilding them at a
checkpoint means walking its ancestors back to the nearest one whose history is known (held
in memory, or a snapshot: LangGraph's, or the root of a pruned thread), then replaying the
writes since. `graph.storage.sqlite.histories` calls `replay` and keeps what it rebuilt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator
from contextlib import closing
from typing import Any

from graph.storage.internals import DeltaChannelHistory
from graph.storage.sqlite import parts
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, unpacked

StepValues = Callable[[str, bytes, "str | None"], tuple[dict[str, Any], dict[str, Any]]]
"""Decodes a stored step's (type, value, metadata) into its checkpoint and metadata."""

# A checkpoint's ancestors, nearest first, by parent links (ids are not ordered across
# processes), each with whether it holds the messages itself. CROSS JOIN keeps each step a
# primary-key lookup; the walk reads no more of it than it needs.
CHAIN_SQL = (
    "WITH RECURSIVE chain(id, parent, snapshot) AS ("
    "SELECT id, parent, snapshot FROM ferry_steps WHERE thread = ? AND ns = ? AND id = ? "
    "UNION ALL SELECT s.id, s.parent, s.snapshot FROM chain AS c CROSS JOIN ferry_steps AS s "
    "ON s.thread = ? AND s.ns = ? AND s.id = c.parent) "
    "SELECT id, snapshot FROM chain"
)


def ancestors(
    cur: sqlite3.Cursor, number: int, namespace: str, target: Any
) -> Generator[tuple[Any, int], None, None]:
    """A step's ancestors, nearest first, each with its snapshot flag.

    They are read on a cursor of their own, closed when the walk is: close a walk left
    unfinished before writing on the connection.
    """
    walk = cur.connection.cursor()
    try:
        walk.execute(CHAIN_SQL, (number, namespace, target, number, namespace))
        walked: set[Any] = set()
        for step, snapshot in walk:
            if not walked:
                walked.add(step)  # the first row is the target itself
                continue
            if step in walked:
                return  # a re-put checkpoint made the chain loop
            walked.add(step)
            yield step, snapshot
    finally:
        # An open statement holds its read snapshot: a write on the connection after another
        # process committed would then fail at once ("database is locked"), not wait its turn.
        walk.close()


def replay(
    cur: sqlite3.Cursor,
    serde: Any,
    step_values: StepValues,
    key: tuple[int, str, Any],
    remembered: Callable[[Any], list[Any] | None],
) -> DeltaChannelHistory:
    """The `messages` writes since the nearest known ancestor, and its history.

    Known: remembered by this process, stored as a part (`graph.storage.sqlite.parts`), or a
    snapshot.
    `key` is (thread number, namespace, stored checkpoint key); `remembered` is asked with
    stored keys too. The writes' task ids are left as stored (Ferry folds only their values).
    A snapshot must be honoured: when new input replaces an unfinished step, LangGraph takes
    one so the abandoned step's stored writes are not replayed.
    """
    number, namespace, target = key
    chain: list[Any] = []
    seed: Any = None
    known: parts.Index | None = None  # read once the walk gets past what this process holds
    with closing(ancestors(cur, number, namespace, target)) as walk:
        for step, snapshot in walk:
            seed = remembered(step)
            if seed is None and known is None:
                known = parts.index(cur, number, namespace)
                if target in known:
                    history = parts.history_at(cur, serde, number, namespace, target, known)
                    return {"writes": [], "seed": history}
            chain.append(step)
            if seed is None and known is not None and step in known:
                seed = parts.history_at(cur, serde, number, namespace, step, known)
            if seed is None and snapshot:
                cur.execute(
                    "SELECT type, value, metadata FROM ferry_steps "
                    "WHERE thread = ? AND ns = ? AND id = ?",
                    (number, namespace, step),
                )
                checkpoint, _ = step_values(*cur.fetchone())
                seed = checkpoint.get("channel_values", {}).get(UNBOUNDED_CHANNEL)
            if seed is not None:
                break
    resolver = parts.Resolver(cur, serde, number, namespace)
    writes = _message_writes(cur, resolver, number, namespace, chain) if chain else []
    entry: DeltaChannelHistory = {"writes": writes}
    if seed is not None:
        entry["seed"] = seed
    return entry


def _message_writes(
    cur: sqlite3.Cursor, resolver: parts.Resolver, number: int, namespace: str, chain: list[Any]
) -> list[Any]:
    """The `messages` writes at the checkpoints in `chain`, oldest first, decoded."""
    return [
        (task, UNBOUNDED_CHANNEL, resolver.value(type_tag, value))
        for _, task, _, records in parts.writes_at(cur, number, namespace, chain)
        for _, channel, type_tag, value in unpacked(records)
        if channel == UNBOUNDED_CHANNEL
    ]
