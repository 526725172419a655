"""Rebuilding a thread's messages from Postgres, from the nearest history Ferry knows.

LangGraph's Postgres saver replays a thread's writes back to its last snapshot, which for a
long thread is its start. As in SQLite (`graph.storage.sqlite.saver`), Ferry walks a checkpoint's
ancestors only back to the nearest one whose history it knows: one this process rebuilt (kept
in memory), the thread's saved history (`ferry_histories`, a base copy extended by parts of at
least `PART` messages in `ferry_history_parts`), or a snapshot LangGraph took; then it replays
the writes since. In LangGraph's tables the saved history is a copy beside the writes (SQLite's
own layout stores each message once, `graph.storage.sqlite.parts`).

The reads and writes are written once, as generators of queries (`Steps`) that the sync and
the async saver each run on their own cursor (`graph.storage.postgres.kept`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from graph.storage.history.folding import Fold
from graph.storage.history.held import Histories, bounded
from graph.storage.history.messages import PART, folded
from graph.storage.history.messages import Key as Key
from graph.storage.internals import DeltaChannelHistory, build_delta_channels_writes_history
from graph.storage.postgres.history_sql import (
    APPEND,
    CHAIN,
    DELETE_PARTS,
    LOCK_BASE,
    POINTS,
    SAVE,
    SNAPSHOT,
    VALUES,
    WRITES,
)

T = TypeVar("T")
_SAVE_FROM = 200  # messages; a shorter history replays in a few milliseconds
_SAVE_GROWTH = 1.5  # a new base once the history is half again what is saved (parts aside)
Thread = tuple[str, str]
"""(thread_id, checkpoint_ns)"""
Saved = tuple[str, list[Any]]
"""The newest saved point a process knows: its checkpoint id and the history there."""


@dataclass(frozen=True)
class Query:
    """One statement for a saver to run, and what of its result the steps want back."""

    sql: str
    params: Any
    want: Literal["one", "all", "count"] = "all"


Steps = Generator[Query, Any, T]
"""Queries to run one after the other, each sent its result; returns what they found."""


class SavedPoints:
    """Per thread, the newest saved point this process knows (`Saved`), which a part extends."""

    def __init__(self) -> None:
        self._saved: OrderedDict[Thread, Saved] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread: Thread) -> Saved | None:
        """The newest saved point of a thread this process knows, or None."""
        with self._lock:
            return self._saved.get(thread)

    def know(self, thread: Thread, known: Saved | None) -> None:
        """Remember where a thread's history is saved (None: stop extending what was)."""
        with self._lock:
            if known is None:
                self._saved.pop(thread, None)
            else:
                bounded(self._saved, thread, known)

    def forget(self, thread_id: str) -> None:
        """Drop what is known of a thread (it was deleted)."""
        with self._lock:
            for thread in [t for t in self._saved if t[0] == thread_id]:
                del self._saved[thread]


Rebuilt = tuple[DeltaChannelHistory, list[Any] | None, int]
"""The replayed history, the messages it folds into (None: not Ferry's), the saved length."""


def rebuild(
    kept: Histories, saved: SavedPoints, serde: Any, key: Key, fold: Fold | None
) -> Steps[Rebuilt]:
    """Rebuild the messages at `key` from the nearest kept, saved or snapshot ancestor.

    The saved length is the saved history's, parts included (0 if none). A saved point that
    does not fit together (`joined`) is passed over: the walk goes on to an earlier one.
    """
    thread_id, namespace, target = key
    remembered = kept.of_thread((thread_id, namespace))
    base, parts = _points((yield Query(POINTS, {"thread": thread_id, "ns": namespace})))
    # Each saved point's checkpoint, and the length its parts run to (None: the base alone).
    points: dict[str, int | None] = {base[0]: None} if base else {}
    points.update((checkpoint_id, length) for length, checkpoint_id in parts)
    seed: Any = None
    while True:
        rows = yield Query(CHAIN, chain_params(key, [*remembered, *points]))
        chain, snapshot = walk(rows, target)
        oldest = chain[-1] if chain else None
        if oldest in remembered:
            seed = list(remembered[str(oldest)])
        elif oldest in points and base is not None:
            upto = points[str(oldest)]
            params = {"thread": thread_id, "ns": namespace, "base": base[0], "upto": upto or 0}
            seed = joined((yield Query(VALUES, params)), serde, upto)
            if seed is None:  # walk on past it, to an earlier point that fits
                points = {at: up for at, up in points.items() if _before(up, upto)}
                continue
            saved.know((thread_id, namespace), (str(oldest), list(seed)))
        elif snapshot is not None:
            row = yield Query(SNAPSHOT, (thread_id, namespace, snapshot), "one")
            seed = serde.loads_typed((row["type"], row["blob"])) if row else None
        break
    where = {"thread": thread_id, "ns": namespace, "chain": chain}
    rows = (
        (yield Query(WRITES, {**where, "first": min(chain), "last": max(chain)})) if chain else []
    )
    entry = replayed(chain, seed, rows, serde)
    saved_length = parts[-1][0] if parts else base[1] if base else 0
    values = [value for _, _, value in entry["writes"]]
    return entry, folded(entry.get("seed"), values, fold), saved_length


def _before(length: int | None, failed: int | None) -> bool:
    """Whether a saved point (its parts' length, None for the base) lies before a failed one."""
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


def keep_saved(
    saved: SavedPoints, serde: Any, key: Key, messages: list[Any], length: int
) -> Steps[Saved | None] | None:
    """Extend the saved history by a part, or save it anew (a base); None if neither is due.

    The steps run in one transaction and return what the process then knows is saved.
    """
    thread = key[:2]
    known = saved.get(thread)
    if known is not None and len(known[1]) == length and len(messages) >= length + PART:
        if extends(messages, known[1]):
            return _saved_steps(serde, key, messages, (known[0], length))
        saved.know(thread, None)  # another branch: stop comparing each step
    if worth_saving(messages, length):
        return _saved_steps(serde, key, messages, None)
    return None


def _saved_steps(
    serde: Any, key: Key, messages: list[Any], extending: tuple[str, int] | None
) -> Steps[Saved | None]:
    thread_id, namespace, checkpoint_id = key
    where = {"thread": thread_id, "ns": namespace}
    if extending is not None:
        saved_at, length = extending
        # The base row's lock orders this append after any other append or new base.
        yield Query(LOCK_BASE, where)
        type_tag, value = serde.dumps_typed(messages[length:])
        part = {**where, "messages": len(messages), "at": checkpoint_id, "saved_at": saved_at}
        if (yield Query(APPEND, {**part, "type": type_tag, "value": value}, "count")) == 1:
            return checkpoint_id, messages
        if not worth_saving(messages, length):
            return None
    type_tag, value = serde.dumps_typed(messages)
    saved = yield Query(SAVE, (*key, len(messages), type_tag, value), "count")
    if saved != 1:
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


def worth_saving(messages: list[Any], saved_length: int) -> bool:
    """Whether a history has grown enough since the saved one to be saved in its place."""
    return bool(len(messages) >= max(_SAVE_FROM, _SAVE_GROWTH * saved_length))


def extends(messages: Sequence[Any], saved: Sequence[Any]) -> bool:
    """Whether `messages` begins with exactly the `saved` ones (the same objects, or equal)."""
    if len(messages) < len(saved):
        return False
    return all(a is b or a == b for a, b in zip(messages, saved, strict=False))
