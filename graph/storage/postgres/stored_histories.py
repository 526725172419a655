"""Rebuilding a thread's messages in Postgres from the nearest history Ferry knows.

LangGraph's Postgres saver replays a thread's writes back to its last snapshot, which for a
long thread is its start. As in SQLite (`graph.storage.sqlite.saver`), Ferry walks a
checkpoint's ancestors only back to the nearest one whose history it knows: one this process
rebuilt (cached), the thread's stored history (`ferry_histories`, a base copy extended by parts
of at least `PART` messages in `ferry_history_parts`), or a snapshot LangGraph took; then it
replays the writes since. In LangGraph's tables the stored history is a copy beside the writes
(SQLite's own layout stores each message once, `graph.storage.sqlite.parts`).

The reads and writes are written once, with their SQL, as generators of queries (`Steps`) that
the sync and the async saver each run on their own cursor (`graph.storage.postgres.saver`); what
a saver caches of them, and where it knows they are stored, is its `PostgresHistories`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from graph.storage.history.folding import Fold
from graph.storage.history.messages import PART, CachedHistories, History, bounded, folded, seeded
from graph.storage.history.messages import Key as Key
from graph.storage.internals import DeltaChannelHistory, build_delta_channels_writes_history

T = TypeVar("T")
_STORE_FROM = 200  # messages; a shorter history replays in a few milliseconds
_STORE_GROWTH = 1.5  # a new base once the history is half again what is stored (parts aside)
Thread = tuple[str, str]
"""(thread_id, checkpoint_ns)"""
Stored = tuple[str, list[Any]]
"""The newest stored point a process knows: its checkpoint id and the history there."""

# -- the statements ------------------------------------------------------------------------
# Ferry's tables beside LangGraph's (created by `graph.storage.postgres.layout_versions`): one
# stored history per thread and namespace (its base), and the parts that extend it since.

_BASE = "FROM ferry_histories WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s"
_PARTS = "FROM ferry_history_parts WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s"
POINTS = (
    f"SELECT checkpoint_id, messages, false AS part {_BASE} "
    f"UNION ALL SELECT checkpoint_id, messages, true {_PARTS} ORDER BY part, messages"
)
"""Where the thread's history is stored: the base, then each part, oldest first."""
VALUES = (
    f"SELECT messages, type, value, false AS part {_BASE} AND checkpoint_id = %(base)s "
    f"UNION ALL SELECT messages, type, value, true {_PARTS} AND messages <= %(upto)s "
    "ORDER BY part, messages"
)
"""The base stored at `base` and the parts up to length `upto`: one round trip."""
STORE = (
    "INSERT INTO ferry_histories VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE SET checkpoint_id = excluded.checkpoint_id,"
    " messages = excluded.messages, type = excluded.type, value = excluded.value "
    "WHERE ferry_histories.messages < excluded.messages"
)
LOCK_BASE = f"SELECT 1 {_BASE} FOR UPDATE"
# The newest stored point (the last part, else the base) must still be the one extended; the
# base row's lock (`LOCK_BASE`, same transaction) keeps it so until the part is in.
APPEND = (
    "INSERT INTO ferry_history_parts (thread_id, checkpoint_ns, messages, checkpoint_id, type, "
    "value) SELECT %(thread)s, %(ns)s, %(messages)s, %(at)s, %(type)s, %(value)s WHERE coalesce("
    f"(SELECT checkpoint_id {_PARTS} ORDER BY messages DESC LIMIT 1), "
    f"(SELECT checkpoint_id {_BASE})) = %(stored_at)s ON CONFLICT DO NOTHING"
)
DELETE_PARTS = "DELETE FROM ferry_history_parts WHERE thread_id = %s AND checkpoint_ns = %s"
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
# The range bounds the scan by the primary key's prefix whatever the planner estimates (a
# thread's writes are not scanned whole); `ANY` then picks the chain's rows out of it.
WRITES = (
    "SELECT checkpoint_id, channel, task_id, idx, type, blob, task_path FROM checkpoint_writes "
    "WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s AND channel = 'messages' "
    "AND checkpoint_id BETWEEN %(first)s AND %(last)s AND checkpoint_id = ANY(%(chain)s::text[])"
)


# -- the steps, and what a saver caches ----------------------------------------------------


@dataclass(frozen=True)
class Query:
    """One statement for a saver to run, and what of its result the steps want back."""

    sql: str
    params: Any
    want: Literal["one", "all", "count"] = "all"


Steps = Generator[Query, Any, T]
"""Queries to run one after the other, each sent its result; returns what they found."""


class StoredPoints:
    """Per thread, the newest stored point this process knows (`Stored`), which a part extends."""

    def __init__(self) -> None:
        self._stored: OrderedDict[Thread, Stored] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread: Thread) -> Stored | None:
        """The newest stored point of a thread this process knows, or None."""
        with self._lock:
            return self._stored.get(thread)

    def know(self, thread: Thread, known: Stored | None) -> None:
        """Note where a thread's history is stored (None: stop extending what was)."""
        with self._lock:
            if known is None:
                self._stored.pop(thread, None)
            else:
                bounded(self._stored, thread, known)

    def forget(self, thread_id: str) -> None:
        """Drop what is known of a thread (it was deleted)."""
        with self._lock:
            for thread in [t for t in self._stored if t[0] == thread_id]:
                del self._stored[thread]


Rebuilt = tuple[DeltaChannelHistory, list[Any] | None, int]
"""The replayed history, the messages it folds into (None: not Ferry's), the stored length."""


class PostgresHistories:
    """The histories a Postgres saver rebuilt, and where each thread's is stored.

    Each saver, sync or async, holds one, as LangGraph's `BasePostgresSaver` holds what its
    two savers share.
    """

    def __init__(self, serde: Callable[[], Any], fold: Callable[[], Fold | None]) -> None:
        # The saver's serializer and reducer, read when used (a caller may replace either).
        self._serde, self._fold = serde, fold
        self.cached = CachedHistories()
        self.stored = StoredPoints()

    def cached_at(self, key: Key) -> History | None:
        """The history at `key` if this process caches it."""
        known = self.cached.get(key)
        return None if known is None else seeded(known)

    def rebuild(self, key: Key) -> Steps[Rebuilt]:
        """The steps that rebuild the history at `key` (`rebuild`)."""
        return rebuild(self.cached, self.stored, self._serde(), key, self._fold())

    def rebuilt(self, key: Key, rebuilt: Rebuilt) -> tuple[History, Steps[Stored | None] | None]:
        """What to hand LangGraph, and the steps that store the history if that is due."""
        entry, messages, stored_length = rebuilt
        if messages is None:
            return {"messages": entry}, None
        self.cached.cache(key, messages)
        steps = store(self.stored, self._serde(), key, messages, stored_length)
        return seeded(messages), steps

    def forget(self, thread_id: str) -> None:
        """Drop every history cached for a thread (it was deleted)."""
        self.cached.forget(thread_id)
        self.stored.forget(thread_id)


# -- rebuilding and storing ------------------------------------------------------------------


def rebuild(
    cached: CachedHistories, stored: StoredPoints, serde: Any, key: Key, fold: Fold | None
) -> Steps[Rebuilt]:
    """Rebuild the messages at `key` from the nearest cached, stored or snapshot ancestor.

    The stored length is the stored history's, parts included (0 if none). A stored point that
    does not fit together (`joined`) is passed over: the walk goes on to an earlier one.
    """
    thread_id, namespace, target = key
    cached_here = cached.of_thread((thread_id, namespace))
    base, parts = _points((yield Query(POINTS, {"thread": thread_id, "ns": namespace})))
    # Each stored point's checkpoint, and the length its parts run to (None: the base alone).
    points: dict[str, int | None] = {base[0]: None} if base else {}
    points.update((checkpoint_id, length) for length, checkpoint_id in parts)
    seed: Any = None
    while True:
        rows = yield Query(CHAIN, chain_params(key, [*cached_here, *points]))
        chain, snapshot = walk(rows, target)
        oldest = chain[-1] if chain else None
        if oldest in cached_here:
            seed = list(cached_here[str(oldest)])
        elif oldest in points and base is not None:
            upto = points[str(oldest)]
            params = {"thread": thread_id, "ns": namespace, "base": base[0], "upto": upto or 0}
            seed = joined((yield Query(VALUES, params)), serde, upto)
            if seed is None:  # walk on past it, to an earlier point that fits
                points = {at: up for at, up in points.items() if _before(up, upto)}
                continue
            stored.know((thread_id, namespace), (str(oldest), list(seed)))
        elif snapshot is not None:
            row = yield Query(SNAPSHOT, (thread_id, namespace, snapshot), "one")
            seed = serde.loads_typed((row["type"], row["blob"])) if row else None
        break
    where = {"thread": thread_id, "ns": namespace, "chain": chain}
    rows = (
        (yield Query(WRITES, {**where, "first": min(chain), "last": max(chain)})) if chain else []
    )
    entry = replayed(chain, seed, rows, serde)
    stored_length = parts[-1][0] if parts else base[1] if base else 0
    values = [value for _, _, value in entry["writes"]]
    return entry, folded(entry.get("seed"), values, fold), stored_length


def _before(length: int | None, failed: int | None) -> bool:
    """Whether a stored point (its parts' length, None for the base) lies before a failed one."""
    return failed is not None and (length is None or length < failed)


def _points(rows: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, int] | None, list[Any]]:
    """The base (checkpoint id, length) and the parts (length, checkpoint id), oldest first."""
    bases = [(row["checkpoint_id"], int(row["messages"])) for row in rows if not row["part"]]
    if not bases:
        return None, []  # parts are read only after a base
    return bases[0], [(int(row["messages"]), row["checkpoint_id"]) for row in rows if row["part"]]


def joined(rows: Sequence[Mapping[str, Any]], serde: Any, upto: int | None) -> list[Any] | None:
    """The base followed by its parts up to length `upto`; None if they do not fit together."""
    if not rows or rows[0]["part"]:
        return None  # the base was replaced since its parts were listed
    base = serde.loads_typed((rows[0]["type"], rows[0]["value"]))
    if not isinstance(base, list):
        return None
    if upto is None:
        return base
    messages = base
    for row in rows[1:]:
        part = serde.loads_typed((row["type"], row["value"]))
        if not isinstance(part, list) or len(messages) + len(part) != row["messages"]:
            return None
        messages.extend(part)
    return messages if len(messages) == upto else None


def store(
    stored: StoredPoints, serde: Any, key: Key, messages: list[Any], length: int
) -> Steps[Stored | None] | None:
    """Extend the stored history by a part, or store it anew (a base); None if neither is due.

    The steps run in one transaction and return what the process then knows is stored.
    """
    thread = key[:2]
    known = stored.get(thread)
    if known is not None and len(known[1]) == length and len(messages) >= length + PART:
        if extends(messages, known[1]):
            return _storing(serde, key, messages, (known[0], length))
        stored.know(thread, None)  # another branch: stop comparing each step
    if worth_storing(messages, length):
        return _storing(serde, key, messages, None)
    return None


def _storing(
    serde: Any, key: Key, messages: list[Any], extending: tuple[str, int] | None
) -> Steps[Stored | None]:
    thread_id, namespace, checkpoint_id = key
    where = {"thread": thread_id, "ns": namespace}
    if extending is not None:
        stored_at, length = extending
        # The base row's lock orders this append after any other append or new base.
        yield Query(LOCK_BASE, where)
        type_tag, value = serde.dumps_typed(messages[length:])
        part = {**where, "messages": len(messages), "at": checkpoint_id, "stored_at": stored_at}
        if (yield Query(APPEND, {**part, "type": type_tag, "value": value}, "count")) == 1:
            return checkpoint_id, messages
        if not worth_storing(messages, length):
            return None
    type_tag, value = serde.dumps_typed(messages)
    written = yield Query(STORE, (*key, len(messages), type_tag, value), "count")
    if written != 1:
        return None
    yield Query(DELETE_PARTS, (thread_id, namespace), "count")  # they extended the old base
    return checkpoint_id, messages


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


def worth_storing(messages: list[Any], stored_length: int) -> bool:
    """Whether a history has grown enough since the stored one to be stored in its place."""
    return bool(len(messages) >= max(_STORE_FROM, _STORE_GROWTH * stored_length))


def extends(messages: Sequence[Any], stored: Sequence[Any]) -> bool:
    """Whether `messages` begins with exactly the `stored` ones (the same objects, or equal)."""
    if len(messages) < len(stored):
        return False
    return all(a is b or a == b for a, b in zip(messages, stored, strict=False))
