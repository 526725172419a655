"""Rebuilding a thread's messages from Postgres, from the nearest history Ferry knows.

LangGraph's Postgres saver replays a thread's writes back to its last snapshot, which for a
long thread is its start. As in SQLite (`graph.storage.history`), Ferry walks a checkpoint's
ancestors only back to the nearest one whose history it knows: one this process rebuilt (kept
in memory), the thread's saved history (`ferry_histories`, saved again each time the history
has grown by half), or a snapshot LangGraph took; then it replays the writes since, in one
query. What is rebuilt, kept and saved follows `FerrySaver`'s rules, with its constants.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.types import Overwrite

from graph.state import fold_messages
from graph.storage.history import Key as Key
from graph.storage.history import are_messages
from graph.storage.internals import (
    DeltaChannelHistory,
    build_delta_channels_writes_history,
    snapshot_value,
)
from graph.storage.sqlite import _CACHED_HISTORIES, _SAVE_FROM, _SAVE_GROWTH

SAVED_HISTORIES_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_histories (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, messages INTEGER NOT NULL, "
    "type TEXT NOT NULL, value BYTEA NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns))"
)
"""One saved history per thread and namespace, replaced only by a longer one (as in SQLite)."""
SAVED_AT = (
    "SELECT checkpoint_id, messages FROM ferry_histories "
    "WHERE thread_id = %s AND checkpoint_ns = %s"
)
SAVED = (
    "SELECT type, value FROM ferry_histories "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
)
SAVE = (
    "INSERT INTO ferry_histories VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE SET checkpoint_id = excluded.checkpoint_id,"
    " messages = excluded.messages, type = excluded.type, value = excluded.value "
    "WHERE ferry_histories.messages < excluded.messages"
)
SNAPSHOT = (
    "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND channel = 'messages' AND version = %s AND type <> 'empty'"
)
_HAS_SNAPSHOT = (
    "EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = %(thread)s "
    "AND b.checkpoint_ns = %(ns)s AND b.channel = 'messages' AND b.type <> 'empty' "
    "AND b.version = (c.checkpoint -> 'channel_versions' ->> 'messages'))"
)
_VERSION = "c.checkpoint -> 'channel_versions' ->> 'messages'"
# A checkpoint's ancestors by parent links, stopping after the first whose history is known
# (`known`) or snapshotted. Each step is one primary-key lookup: a LATERAL subquery that LIMIT
# keeps from being flattened into a join, which the planner may run as a scan of the whole
# thread at every step. UNION, not UNION ALL: a re-put checkpoint that
# made the chain loop repeats a row, which ends the recursion.
CHAIN = (
    "WITH RECURSIVE chain AS ("
    f"SELECT c.checkpoint_id, c.parent_checkpoint_id, {_VERSION} AS version, "
    "false AS snapshot, false AS stop FROM checkpoints c "
    "WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = %(target)s "
    "UNION SELECT p.checkpoint_id, p.parent_checkpoint_id, p.version, p.snapshot, "
    "p.checkpoint_id = ANY(%(known)s::text[]) OR p.snapshot FROM chain a CROSS JOIN LATERAL ("
    f"SELECT c.checkpoint_id, c.parent_checkpoint_id, {_VERSION} AS version, "
    f"{_HAS_SNAPSHOT} AS snapshot FROM checkpoints c WHERE c.thread_id = %(thread)s "
    "AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = a.parent_checkpoint_id LIMIT 1) AS p "
    "WHERE NOT a.stop) "
    "SELECT checkpoint_id, parent_checkpoint_id, version, snapshot FROM chain"
)
WRITES = (
    "SELECT checkpoint_id, channel, task_id, idx, type, blob, task_path FROM checkpoint_writes "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND channel = 'messages' "
    "AND checkpoint_id = ANY(%s::text[])"
)


class KeptHistories:
    """The histories a process rebuilt, most recently used last (a bounded, thread-safe LRU)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Key, list[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key) -> list[Any] | None:
        """The history kept at a checkpoint, or None."""
        with self._lock:
            value = self._kept.get(key)
            if value is not None:
                self._kept.move_to_end(key)
            return value

    def of_thread(self, thread_id: str, namespace: str) -> dict[str, list[Any]]:
        """Every history kept for a thread's namespace, by checkpoint id."""
        with self._lock:
            return {k[2]: v for k, v in self._kept.items() if k[:2] == (thread_id, namespace)}

    def keep(self, key: Key, value: list[Any]) -> None:
        """Keep a history, dropping the least recently used beyond the bound."""
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > _CACHED_HISTORIES:
                self._kept.popitem(last=False)

    def forget(self, thread_id: str) -> None:
        """Drop every history kept for a thread (it was deleted)."""
        with self._lock:
            for key in [k for k in self._kept if k[0] == thread_id]:
                del self._kept[key]


def chain_params(key: Key, known: Sequence[str]) -> dict[str, Any]:
    """The parameters of `CHAIN` for the checkpoint `key` names."""
    return {"thread": key[0], "ns": key[1], "target": key[2], "known": list(known)}


def walk(rows: Sequence[Mapping[str, Any]], target: str) -> tuple[list[str], str | None]:
    """The ancestors of `target` the chain query found, nearest first, and a snapshot's version.

    The version is that of the messages snapshot the oldest ancestor holds, None if it holds
    none. A checkpoint met twice (a re-put one made the chain loop) ends the walk.
    """
    by_id = {row["checkpoint_id"]: row for row in rows}
    chain: list[str] = []
    current: Any = by_id[target]["parent_checkpoint_id"] if target in by_id else None
    while current in by_id and current not in chain and current != target:
        chain.append(current)
        current = by_id[current]["parent_checkpoint_id"]
    oldest = by_id[chain[-1]] if chain else None
    return chain, oldest["version"] if oldest is not None and oldest["snapshot"] else None


def replayed(
    chain: list[str], seed: Any, rows: Sequence[Mapping[str, Any]], serde: Any
) -> DeltaChannelHistory:
    """The history from a seed and the chain's writes, as LangGraph's savers hand it over."""
    stage2 = [
        (r["checkpoint_id"], r["channel"], r["task_id"], r["idx"], r["type"], r["blob"],
         r["task_path"])
        for r in rows
    ]  # fmt: skip
    return build_delta_channels_writes_history(
        channels=["messages"], chain_by_ch={"messages": chain},
        seed_val_by_ch={"messages": seed}, seeded=set() if seed is None else {"messages"},
        stage2_rows=stage2, serde=serde,
    )["messages"]  # fmt: skip


def folded(entry: DeltaChannelHistory) -> list[Any] | None:
    """The messages a replayed history folds into; None unless they are Ferry's messages."""
    writes = [value for _, _, value in entry["writes"]]
    seed = entry.get("seed")
    if any(isinstance(value, Overwrite) for value in writes) or not are_messages(seed, writes):
        return None  # an edit in Studio, or not Ferry's messages: LangGraph's generic rebuild
    return fold_messages(snapshot_value(seed), writes)


def worth_saving(messages: list[Any], saved_length: int) -> bool:
    """Whether a history has grown enough since the saved one to be saved in its place."""
    return len(messages) >= max(_SAVE_FROM, _SAVE_GROWTH * saved_length)
