"""Deleting a run's checkpoints: what the server's `multitask_strategy="rollback"` asks for.

A run is named only in its checkpoints' metadata (`run_id`), which is stored inside each step's
value, so finding them reads every step of the file. What a deleted run leaves on the steps
that stay is deleted with it, so the thread reads as if the run had never started:
- the question it was given, stored on the checkpoint it started from (LangGraph keeps a delta
  channel's input there, under a task id made from that checkpoint's id, which the next run
  from it reuses: a question left there would be read in place of the next one);
- a resume value or update it was given there (`NULL_TASK_ID`), as LangGraph stores those;
- the parts holding its messages (writes that stay and refer into them get their values back),
  and the thread's summary row, if it described one of its checkpoints.
Tool calls it started stay recorded as started: their side effects happened.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from graph.storage.codec.allowlist import StoredValueError, naming_thread
from graph.storage.internals import run_writes_on_start
from graph.storage.sqlite import parts
from graph.storage.sqlite.layout import key_of, text_of

if TYPE_CHECKING:
    from graph.storage.sqlite.saver import FerrySaver

_STEPS = (
    "SELECT s.thread, t.thread_id, s.ns, s.id, s.parent, s.type, s.value, s.metadata "
    "FROM ferry_steps AS s JOIN ferry_threads AS t ON t.id = s.thread"
)


def delete_for_runs(saver: FerrySaver, run_ids: Sequence[str]) -> None:
    """Delete the checkpoints the runs made, their writes, and what they left on the others."""
    wanted = {str(run_id) for run_id in run_ids}
    if not wanted:
        return
    with saver.cursor() as cur:
        saver.file.begin_writing(cur)
        doomed = _steps_of(saver, cur.connection.execute(_STEPS), wanted)
        for (number, thread_id, namespace), steps in doomed.items():
            _delete(saver, cur, number, namespace, steps)
            if not namespace:
                marks = ",".join("?" * len(steps))
                cur.execute(
                    "DELETE FROM ferry_thread_summaries "
                    f"WHERE thread_id = ? AND checkpoint_id IN ({marks})",
                    (thread_id, *steps),
                )
    for (_, thread_id, namespace), steps in doomed.items():
        saver.histories.forget(thread_id, namespace)
        saver.part_ends.pop((thread_id, namespace), None)
        for parent in steps.values():
            if parent is not None:
                saver.steps.writes_unknown((thread_id, namespace, text_of(parent)))


def _steps_of(
    saver: FerrySaver, rows: Any, wanted: set[str]
) -> dict[tuple[int, str, str], dict[Any, Any]]:
    """The runs' steps, by thread number, id and namespace: each step's key to its parent's."""
    found: dict[tuple[int, str, str], dict[Any, Any]] = defaultdict(dict)
    for number, thread_id, namespace, key, parent, type_tag, value, metadata in rows:
        with naming_thread({"configurable": {"thread_id": thread_id}}):
            try:
                _, stored_metadata = saver.step_values(type_tag, value, metadata)
            except StoredValueError:  # unreadable here: not known to be the run's, so kept
                continue
        if str(stored_metadata.get("run_id")) in wanted:
            found[(number, thread_id, namespace)][key] = parent
    return found


def _delete(
    saver: FerrySaver, cur: Any, number: int, namespace: str, steps: dict[Any, Any]
) -> None:
    """Delete a thread namespace's `steps`, and what their run left on the steps that stay."""
    keys = list(steps)
    marks = ",".join("?" * len(keys))
    parts.drop_at(cur, saver.serde, number, namespace, set(keys))
    where = f"thread = ? AND ns = ? AND id IN ({marks})"
    cur.execute(f"DELETE FROM ferry_steps WHERE {where}", (number, namespace, *keys))
    cur.execute(f"DELETE FROM ferry_writes WHERE {where}", (number, namespace, *keys))
    for parent in {p for p in steps.values() if p is not None and p not in steps}:
        cur.execute(
            "SELECT 1 FROM ferry_steps WHERE thread = ? AND ns = ? AND parent = ? LIMIT 1",
            (number, namespace, parent),
        )
        if cur.fetchone() is not None:  # another run went on from it: its writes are that run's
            continue
        for task in run_writes_on_start(text_of(parent)):
            cur.execute(
                "DELETE FROM ferry_writes WHERE thread = ? AND ns = ? AND id = ? AND task = ?",
                (number, namespace, parent, key_of(task)),
            )
