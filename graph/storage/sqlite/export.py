"""`ferry export FILE --to-langgraph OUT`: a Ferry file's threads in LangGraph's stock layout.

The way out of Ferry's layout (`ferry migrate` is the way back in): every checkpoint is read
through Ferry's saver, its pending writes with their values resolved, and `put` into LangGraph's
own `SqliteSaver` on a new file under the same ids, parents, metadata and channel versions.
Ferry stores messages as each step's writes (a `DeltaChannel`, `graph.state`); so does LangGraph,
which rebuilds them from the same writes, so the stock saver reads every thread's state as Ferry
does and the graph continues it there. The file is written beside OUT and renamed into place
once complete: OUT is never left half written.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

from graph.storage.errors import DatabaseError
from graph.storage.sqlite.layout import text_of
from graph.storage.sqlite.saver import FerrySaver, open_file


class ExportError(DatabaseError):
    """The export cannot be made as asked; OUT was not written. One line naming the fix."""


@dataclass
class Exported:
    """What `export_to_langgraph` wrote: checkpoints per thread, and writes in all."""

    out: Path
    checkpoints: dict[str, int] = field(default_factory=dict)
    writes: int = 0


def export_to_langgraph(
    path: Path, out: Path, *, thread_ids: Sequence[str] = (), serde: Any = None
) -> Exported:
    """Write the threads of Ferry's file `path` (or those named) into a new stock file `out`."""
    if not path.is_file():
        raise ExportError(f"{path}: no such file")
    if out.exists():
        raise ExportError(f"{out} exists: export writes a new file; name another, or remove it")
    # No reducer: the rows are copied as stored, never folded into messages.
    with closing(FerrySaver(open_file(path), serde)) as saver:
        stored = saver.thread_ids()
        if missing := [t for t in thread_ids if t not in stored]:
            raise ExportError(f"{path}: no thread {missing[0]!r} in Ferry's tables")
        partial = out.with_name(f"{out.name}.partial-{os.getpid()}")
        try:
            report = _write(saver, list(thread_ids) or sorted(stored), partial)
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
    report.out = out
    return report


def _write(saver: Any, thread_ids: list[str], partial: Path) -> Exported:
    report = Exported(partial)
    with closing(sqlite3.connect(partial, check_same_thread=False)) as conn:
        stock = SqliteSaver(conn)
        for thread_id in thread_ids:
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            steps = list(saver.list(config))[::-1]  # oldest first: each parent before its child
            paths = _task_paths(saver, thread_id)
            for step in steps:
                report.writes += _put(stock, step, paths)
            report.checkpoints[thread_id] = len(steps)
        conn.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it to rename
    return report


def _put(stock: SqliteSaver, step: CheckpointTuple, paths: dict[tuple[str, ...], str]) -> int:
    """Store one checkpoint and its pending writes in `stock`; how many writes."""
    configurable = step.config["configurable"]
    parent = (step.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    where: RunnableConfig = {
        "configurable": {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": parent,
        }
    }
    saved = stock.put(where, step.checkpoint, step.metadata, {})
    namespace, checkpoint_id = configurable.get("checkpoint_ns", ""), configurable["checkpoint_id"]
    # Ferry's order is LangGraph's (`writes_sort_key`): each task's special writes (negative
    # indexes) first, then its others in index order, which `put_writes` numbers from 0 again.
    for task_id, group in groupby(step.pending_writes or [], key=lambda write: write[0]):
        writes = [(channel, value) for _, channel, value in group]
        task_path = paths.get((namespace, checkpoint_id, task_id), "")
        special = [w for w in writes if w[0] in WRITES_IDX_MAP]
        for batch in (special, [w for w in writes if w[0] not in WRITES_IDX_MAP]):
            if batch:
                stock.put_writes(saved, batch, task_id, task_path)
    return len(step.pending_writes or [])


def _task_paths(saver: Any, thread_id: str) -> dict[tuple[str, ...], str]:
    """Each task's path by (namespace, checkpoint id, task id): the pending writes lack it."""
    with saver.cursor(transaction=False) as cur:
        cur.execute(
            "SELECT w.ns, w.id, w.task, w.task_path FROM ferry_writes AS w "
            "JOIN ferry_threads AS t ON t.id = w.thread WHERE t.thread_id = ?",
            (thread_id,),
        )
        rows = cur.fetchall()
    return {(ns, text_of(key), text_of(task)): path for ns, key, task, path in rows}
