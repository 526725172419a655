"""A long thread's messages, stored once: in parts of a few turns each, the writes pointing in.

A step's messages are first stored in its writes (`ferry_writes`), one value per message: that
is how LangGraph replays a delta channel. Read cold, a long thread would replay thousands of
small values. So once a thread's history has grown by `PART` messages past its newest part,
the saver stores those messages as one part (`ferry_parts`, at the step the history is at,
continuing the part before it), and the writes they came from keep a reference into the part
instead of their own copy: a cold read joins a thread's parts and replays only the writes
since the newest, and every message is still stored once.

A reference is the write's value with type tag `ferry-part`: `[part step, offset, count]`,
the messages the write added, in the part. Only writes that appended their messages, in
order, are referred to; when a step did anything else (a tool result filed before the newest
message, a removal, a snapshot), the part holds the whole history instead, and the writes
before it keep their values.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import ormsgpack
from langchain_core.messages import BaseMessage, RemoveMessage

from graph.storage.codec.reads import StoredValueError
from graph.storage.sqlite import layout
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, Record

REF = "ferry-part"
"""The type tag of a write that refers to its messages in a part."""


@dataclass(frozen=True)
class Part:
    """Where a part sits in its thread's history."""

    prev: Any
    first: int
    end: int


Index = dict[Any, Part]
"""A thread namespace's parts, by the stored key of their step."""


def index(cur: sqlite3.Cursor, number: int, namespace: str) -> Index:
    """The parts of a thread's namespace (a few hundred rows at a thousand turns)."""
    cur.execute(
        "SELECT id, prev, first, end FROM ferry_parts WHERE thread = ? AND ns = ?",
        (number, namespace),
    )
    return {step: Part(prev, first, end) for step, prev, first, end in cur.fetchall()}


def history_at(
    cur: sqlite3.Cursor, serde: Any, number: int, namespace: str, step: Any, parts: Index
) -> list[Any]:
    """The messages at a part's step: its parts from the first one, joined."""
    chain = [step]
    while (prev := parts[chain[-1]].prev) is not None:
        if prev not in parts or len(chain) > len(parts):
            raise StoredValueError("a stored part continues one that is not there")
        chain.append(prev)
    chain.reverse()
    values = _values(cur, serde, number, namespace, chain)
    messages: list[Any] = []
    for key in chain:
        part = parts[key]
        if part.first != len(messages) or part.end - part.first != len(values[key]):
            raise StoredValueError("stored parts do not join into one history")
        messages.extend(values[key])
    return messages


def _values(
    cur: sqlite3.Cursor, serde: Any, number: int, namespace: str, steps: list[Any]
) -> dict[Any, list[Any]]:
    marks = ",".join("?" * len(steps))
    cur.execute(
        f"SELECT id, type, value FROM ferry_parts WHERE thread = ? AND ns = ? AND id IN ({marks})",
        (number, namespace, *steps),
    )
    found = {}
    for step, type_tag, value in cur.fetchall():
        messages = serde.loads_typed((layout.name_of(type_tag), value))
        if not isinstance(messages, list):
            raise StoredValueError("a stored part is not a message list")
        found[step] = messages
    return found


class Resolver:
    """Reads the values of stored writes, following references into parts (each read once)."""

    def __init__(self, cur: sqlite3.Cursor, serde: Any, number: int, namespace: str) -> None:
        self._conn, self._serde, self._thread = cur.connection, serde, (number, namespace)
        self._parts: dict[Any, list[Any]] = {}

    def value(self, type_tag: str, data: bytes) -> Any:
        """A write's value: its own, or the messages it refers to."""
        if type_tag != REF:
            return self._serde.loads_typed((type_tag, data))
        step, offset, count = _reference(data)
        if step not in self._parts:  # a cursor of its own: the caller's may be mid-read
            found = _values(self._conn.cursor(), self._serde, *self._thread, [step])
            if step not in found:
                raise StoredValueError("a stored write refers to a part that is not there")
            self._parts[step] = found[step]
        messages = self._parts[step]
        if offset + count > len(messages):
            raise StoredValueError("a stored write refers past the end of its part")
        # The part is read once, but each reference is a list of its own: charged as one.
        self._serde.charge(8 * count)
        return messages[offset : offset + count]


def reference(step: Any, offset: int, count: int) -> bytes:
    """A write's reference to `count` messages at `offset` in the part at `step`."""
    return ormsgpack.packb([step, offset, count])


def _reference(data: bytes) -> tuple[Any, int, int]:
    try:
        value = ormsgpack.unpackb(data)
    except ormsgpack.MsgpackDecodeError:
        value = None
    if (
        isinstance(value, list)
        and len(value) == 3
        and isinstance(value[0], bytes | str)
        and all(type(n) is int and n >= 0 for n in value[1:])
    ):
        return value[0], value[1], value[2]
    raise StoredValueError("a stored reference into a part is not in Ferry's form")


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def compact(
    cur: sqlite3.Cursor,
    serde: Any,
    thread: tuple[int, str],
    target: Any,
    messages: list[Any],
    walk: Generator[tuple[Any, int], None, None],
) -> int:
    """Store the history at step `target` as a part; return the history's length there.

    `walk` is the target's ancestors, nearest first, with their snapshot flags (read up to the
    nearest part's step, a snapshot or the root). The writes of those steps that appended their
    messages in order are pointed at the new part; otherwise the part holds the whole history.
    """
    number, namespace = thread
    parts = index(cur, number, namespace)
    steps: list[Any] = []
    stopped_at_snapshot = False
    with closing(walk):
        for step, snapshot in walk:
            steps.append(step)
            if step in parts or snapshot:
                stopped_at_snapshot = step not in parts
                break
    prev = steps[-1] if steps and steps[-1] in parts else None
    first = parts[prev].end if prev is not None else 0
    refs = None
    if not stopped_at_snapshot:  # before a snapshot nothing is replayed: no writes to point in
        rows = writes_at(cur, number, namespace, steps) if steps else []
        refs = _references(Resolver(cur, serde, number, namespace), rows, messages, first, target)
    if refs is None:  # not appends in order: the part holds the whole history
        prev, first, refs = None, 0, {}
    type_tag, value = serde.dumps_typed(messages[first:])
    cur.execute(
        "INSERT OR IGNORE INTO ferry_parts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (number, namespace, target, prev, first, len(messages), layout.code_of(type_tag), value),
    )
    if cur.rowcount != 1:
        return len(messages)  # another process stored it first
    for key, records in refs.items():
        cur.execute(
            "UPDATE ferry_writes SET records = ? "
            "WHERE thread = ? AND ns = ? AND id = ? AND task = ?",
            (layout.packed(records), number, namespace, *key),
        )
    return len(messages)


def writes_at(
    cur: sqlite3.Cursor, number: int, namespace: str, steps: list[Any]
) -> list[tuple[Any, ...]]:
    """The write rows at `steps`, oldest step first, each step's in LangGraph's order.

    Rows hold their records in index order, so this is `writes_sort_key`'s order throughout.

    They are read as one range of the primary key (a fork's rows in it are left out).
    """
    select = "SELECT id, task, task_path, records FROM ferry_writes WHERE thread = ? AND ns = ?"
    if len({type(step) for step in steps}) == 1:  # ids of one kind: they compare
        cur.execute(f"{select} AND id BETWEEN ? AND ?", (number, namespace, min(steps), max(steps)))
    else:
        cur.execute(select, (number, namespace))
    order = {step: i for i, step in enumerate(reversed(steps))}
    rows = [row for row in cur.fetchall() if row[0] in order]
    rows.sort(key=lambda r: (order[r[0]], r[2], r[1].hex() if isinstance(r[1], bytes) else r[1]))
    return rows


def _references(
    resolver: Resolver, rows: list[tuple[Any, ...]], messages: list[Any], first: int, part: Any
) -> dict[tuple[Any, Any], list[Record]] | None:
    """Each write row's records, its messages as references into `part`.

    None if a write did not append its messages in order, where the history has them (by id).
    A task's records are stored in index order, which is LangGraph's order within a task.
    """
    position = first
    rewritten: dict[tuple[Any, Any], list[Record]] = {}
    for step, task, _, stored in rows:
        records = layout.unpacked(stored)
        changed = False
        for i, (idx, channel, type_tag, data) in enumerate(records):
            if channel != UNBOUNDED_CHANNEL:
                continue
            items = _items(resolver.value(type_tag, data))
            for item in items:
                if position >= len(messages) or isinstance(item, RemoveMessage):
                    return None
                if isinstance(item, BaseMessage) and item.id and item.id != messages[position].id:
                    return None
                position += 1
            records[i] = (
                idx,
                channel,
                REF,
                reference(part, position - len(items) - first, len(items)),
            )
            changed = True
        if changed:
            rewritten[(step, task)] = records
    return rewritten if position == len(messages) else None


def drop(cur: sqlite3.Cursor, serde: Any, number: int, namespace: str) -> None:
    """Delete a namespace's parts, giving the writes that refer to them their values back.

    Retention runs it once the kept checkpoints no longer need the parts (the oldest holds the
    whole history), so the few kept writes own their values again.
    """
    _own_values(cur, serde, number, namespace, None)
    cur.execute("DELETE FROM ferry_parts WHERE thread = ? AND ns = ?", (number, namespace))


def drop_at(cur: sqlite3.Cursor, serde: Any, number: int, namespace: str, steps: set[Any]) -> None:
    """Delete the parts at `steps` and those continuing them, as `drop` does.

    A part at a deleted step may hold messages of steps that stay (a part holds the history
    since the part before it): their writes get those values back first.
    """
    found = index(cur, number, namespace)
    gone = {step for step in steps if step in found}
    while more := {s for s, part in found.items() if part.prev in gone and s not in gone}:
        gone |= more
    if not gone:
        return
    _own_values(cur, serde, number, namespace, gone)
    marks = ",".join("?" * len(gone))
    cur.execute(
        f"DELETE FROM ferry_parts WHERE thread = ? AND ns = ? AND id IN ({marks})",
        (number, namespace, *gone),
    )


def _own_values(
    cur: sqlite3.Cursor, serde: Any, number: int, namespace: str, gone: set[Any] | None
) -> None:
    """Give the writes that refer into the parts at `gone` (None: any part) their values back."""
    resolver = Resolver(cur, serde, number, namespace)
    cur.execute(
        "SELECT id, task, records FROM ferry_writes WHERE thread = ? AND ns = ?",
        (number, namespace),
    )
    for step, task, stored in cur.fetchall():
        records = layout.unpacked(stored)
        refs = [i for i, (_, _, type_tag, data) in enumerate(records) if type_tag == REF]
        if gone is not None:
            refs = [i for i in refs if _reference(records[i][3])[0] in gone]
        if not refs:
            continue
        for i in refs:
            idx, channel, type_tag, data = records[i]
            records[i] = (idx, channel, *serde.dumps_typed(resolver.value(type_tag, data)))
        cur.execute(
            "UPDATE ferry_writes SET records = ? "
            "WHERE thread = ? AND ns = ? AND id = ? AND task = ?",
            (layout.packed(records), number, namespace, step, task),
        )
