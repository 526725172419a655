"""Reading checkpoints from Ferry's SQLite layout: `get_tuple`, `list` and their rows.

A step's row holds its checkpoint and metadata in one value; its pending writes are one row
per task, their records packed (`graph.storage.sqlite.layout`), a `messages` write possibly a
reference into a stored part (`graph.storage.sqlite.parts`).
"""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    writes_sort_key,
)

from graph.storage.codec.allowlist import StoredValueError, naming_thread
from graph.storage.sqlite import layout, parts
from graph.storage.sqlite.layout import key_of, text_of

if TYPE_CHECKING:
    from graph.storage.sqlite.saver import FerrySaver

STEP = "SELECT id, parent, type, value, metadata FROM ferry_steps WHERE thread = ? AND ns = ?"
"""A thread namespace's steps (add `AND id = ?` for one)."""
_WRITES = "SELECT task, task_path, records FROM ferry_writes WHERE thread = ? AND ns = ? AND id = ?"
_LISTED = (
    "SELECT s.thread, t.thread_id, s.ns, s.id, s.parent, s.type, s.value, s.metadata "
    "FROM ferry_steps AS s JOIN ferry_threads AS t ON t.id = s.thread "
)


def get_tuple(saver: FerrySaver, config: RunnableConfig) -> CheckpointTuple | None:
    """The checkpoint `config` names, or its thread's newest, with its pending writes."""
    thread_id = str(config["configurable"]["thread_id"])
    namespace = config["configurable"].get("checkpoint_ns", "")
    with saver.cursor(transaction=False) as cur, naming_thread(config):
        number = saver.file.thread_number(cur, thread_id)
        if number is None:
            return None
        if checkpoint_id := get_checkpoint_id(config):
            cur.execute(f"{STEP} AND id = ?", (number, namespace, key_of(checkpoint_id)))
        else:
            cur.execute(f"{STEP} ORDER BY id DESC LIMIT 1", (number, namespace))
        row = cur.fetchone()
        if row is None:
            return None
        pending = _pending(saver, cur, number, namespace, row[0])
        return _tuple(saver, thread_id, namespace, row, pending)


def list_checkpoints(
    saver: FerrySaver,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None = None,  # noqa: A002 - the saver interface's name
    before: RunnableConfig | None = None,
    limit: int | None = None,
) -> Iterator[CheckpointTuple]:
    """The matching checkpoints, newest first (by id, as LangGraph's savers order them)."""
    where: list[str] = ["1"]
    params: list[Any] = []
    configurable = (config or {}).get("configurable", {})
    with saver.cursor(transaction=False) as cur:
        if "thread_id" in configurable:
            number = saver.file.thread_number(cur, str(configurable["thread_id"]))
            if number is None:
                return
            where.append("s.thread = ?")
            params.append(number)
        if "checkpoint_ns" in configurable:
            where.append("s.ns = ?")
            params.append(configurable["checkpoint_ns"])
        if checkpoint_id := configurable.get("checkpoint_id"):
            where.append("s.id = ?")
            params.append(key_of(checkpoint_id))
        if before is not None and (before_id := get_checkpoint_id(before)):
            where.append("s.id < ?")
            params.append(key_of(before_id))
        cur.execute(f"{_LISTED} WHERE {' AND '.join(where)} ORDER BY s.id DESC", params)
        rows = cur.fetchall()
    found = 0
    for number, thread_id, namespace, *step in rows:
        if limit is not None and found >= limit:
            return
        with naming_thread({"configurable": {"thread_id": thread_id}}):
            values = step_values(saver, *step[2:])
            if filter and not all(values[1].get(k) == v for k, v in filter.items()):
                continue
            with saver.cursor(transaction=False) as cur:
                pending = _pending(saver, cur, number, namespace, step[0])
            found += 1
            saved = _tuple(saver, thread_id, namespace, step, pending, values)
        yield saved  # outside the read: what the caller reads meanwhile is not part of it


def _pending(
    saver: FerrySaver, cur: sqlite3.Cursor, number: int, namespace: str, key: Any
) -> builtins.list[PendingWrite]:
    """A checkpoint's pending writes, decoded, in LangGraph's order (`writes_sort_key`)."""
    cur.execute(_WRITES, (number, namespace, key))
    writes = [
        (text_of(task), task_path, record)
        for task, task_path, records in cur.fetchall()
        for record in layout.unpacked(records)
    ]
    writes.sort(key=lambda w: writes_sort_key(w[1], w[0], w[2][0]))
    resolver = parts.Resolver(cur, saver.serde, number, namespace)
    return [(task, channel, resolver.value(t, v)) for task, _, (_, channel, t, v) in writes]


def _tuple(
    saver: FerrySaver,
    thread_id: str,
    namespace: str,
    row: Sequence[Any],
    pending: list[PendingWrite],
    values: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> CheckpointTuple:
    key, parent, type_tag, value, metadata_text = row
    checkpoint_id = text_of(key)
    checkpoint, metadata = values or step_values(saver, type_tag, value, metadata_text)
    configurable = {"thread_id": thread_id, "checkpoint_ns": namespace}
    return CheckpointTuple(
        {"configurable": {**configurable, "checkpoint_id": checkpoint_id}},
        {**checkpoint, "id": checkpoint_id},  # type: ignore[typeddict-item]  # stored without its id
        metadata,  # type: ignore[arg-type]  # a stored dict: LangGraph's metadata keys
        None
        if parent is None
        else {"configurable": {**configurable, "checkpoint_id": text_of(parent)}},
        pending,
    )


def step_values(
    saver: FerrySaver, stored_type: Any, value: bytes, metadata_text: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stored step's checkpoint and metadata."""
    type_tag = layout.name_of(stored_type)
    if metadata_text is not None:  # moved from LangGraph's table as it was
        checkpoint = saver.serde.loads_typed((type_tag, value))
        pair: Any = (checkpoint, layout.legacy_metadata(metadata_text))
    else:
        pair = saver.serde.loads_typed((type_tag, value))
    if (
        isinstance(pair, list | tuple)
        and len(pair) == 2
        and isinstance(pair[0], dict)
        and isinstance(pair[1], dict)
    ):
        return pair[0], pair[1]
    raise StoredValueError("a stored checkpoint is not in Ferry's form")
