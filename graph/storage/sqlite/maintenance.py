"""A SQLite saver's threads as a whole: listed, deleted, and cut down to their newest steps.

Retention (`graph.storage.sqlite.retention`) decides what is kept; `keep_only` is the one
statement sequence that drops the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from graph.storage.sqlite import layout, parts
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, key_of
from graph.storage.sqlite.reading import STEP
from graph.storage.sqlite.schema import DELETE_FERRY_ROWS

if TYPE_CHECKING:
    from graph.storage.sqlite.saver import FerrySaver

THREADS_WITH_STEPS = (
    "SELECT thread_id FROM ferry_threads AS t WHERE EXISTS "
    "(SELECT 1 FROM ferry_steps AS s WHERE s.thread = t.id AND s.ns = '')"
)
"""Ids of the threads that have checkpoints on their main namespace."""
_NEW_ROOT = (
    "UPDATE ferry_steps SET parent = NULL, snapshot = ?, type = ?, value = ?, "
    "metadata = NULL WHERE thread = ? AND ns = ? AND id = ?"
)


def thread_ids(saver: FerrySaver) -> list[str]:
    """Ids of the stored threads."""
    with saver.cursor(transaction=False) as cur:
        return [row[0] for row in cur.execute(THREADS_WITH_STEPS).fetchall()]


def delete_thread(saver: FerrySaver, thread_id: str) -> None:
    """Delete a thread's checkpoints, writes and Ferry's rows, and forget its histories."""
    thread_id = str(thread_id)
    with saver.cursor() as cur:
        number = saver.file.thread_number(cur, thread_id)
        if number is not None:  # its number stays: another process may still hold it
            for table in ("ferry_steps", "ferry_writes", "ferry_parts"):
                cur.execute(f"DELETE FROM {table} WHERE thread = ?", (number,))
        for statement in DELETE_FERRY_ROWS:
            cur.execute(statement, (thread_id,))
    saver.histories.forget(thread_id)
    for thread in [k for k in saver.part_ends if k[0] == thread_id]:
        del saver.part_ends[thread]


def namespaces(saver: FerrySaver, thread_id: str) -> list[str]:
    """The checkpoint namespaces a thread has checkpoints in."""
    with saver.cursor(transaction=False) as cur:
        number = saver.file.thread_number(cur, thread_id)
        if number is None:
            return []
        cur.execute("SELECT DISTINCT ns FROM ferry_steps WHERE thread = ?", (number,))
        return [row[0] for row in cur.fetchall()]


def keep_only(
    saver: FerrySaver, config: RunnableConfig, kept: Sequence[str], oldest: dict[str, Any]
) -> int:
    """Delete a namespace's checkpoints but `kept`; the oldest kept becomes `oldest`, a root.

    Returns how many checkpoints went.
    """
    thread_id = str(config["configurable"]["thread_id"])
    namespace = config["configurable"].get("checkpoint_ns", "")
    keys = [key_of(checkpoint_id) for checkpoint_id in kept]
    marks = ",".join("?" * len(keys))
    with saver.cursor() as cur:
        saver.file.begin_writing(cur)
        number = saver.file.thread_number(cur, thread_id)
        if number is None:
            return 0
        cur.execute(f"{STEP} AND id = ?", (number, namespace, keys[-1]))
        row = cur.fetchone()
        _, metadata = saver.step_values(*row[2:])
        stored = {k: v for k, v in oldest.items() if k != "id"}
        type_tag, value = saver.serde.dumps_typed([stored, metadata])
        cur.execute(
            _NEW_ROOT,
            (int(UNBOUNDED_CHANNEL in oldest["channel_values"]), layout.code_of(type_tag),
             value, number, namespace, keys[-1]),
        )  # fmt: skip
        where = f"thread = ? AND ns = ? AND id NOT IN ({marks})"
        cur.execute(f"DELETE FROM ferry_steps WHERE {where}", (number, namespace, *keys))
        removed = int(cur.rowcount)
        cur.execute(f"DELETE FROM ferry_writes WHERE {where}", (number, namespace, *keys))
        parts.drop(cur, saver.serde, number, namespace)
    saver.part_ends.pop((thread_id, namespace), None)
    saver.histories.forget(thread_id, namespace, kept)
    return removed
