"""A running saver folds each step's writes into the history it holds; it never guesses.

The saver builds a new checkpoint's history from its parent's and the writes put at the
parent, without reading them back, only when this process put the parent: then every write
at it came through this saver. A parent another process put (a run resumed after a crash,
with some of its tasks' writes stored before) is read from the file, so no write is missed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint

from graph.state import fold_messages
from graph.storage import sqlite_saver

THREAD: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _history(saver: Any, config: Any) -> list[Any]:
    entry = saver.get_delta_channel_history(config=config, channels=["messages"])["messages"]
    assert entry["writes"] == []  # Ferry's messages: folded by the saver itself
    return list(entry.get("seed", []))


def _texts(messages: list[Any]) -> list[str]:
    return [str(m.content) for m in messages]


def test_writes_put_here_are_folded_whatever_their_order_with_the_put(tmp_path: Path) -> None:
    saver = sqlite_saver(tmp_path / "ferry.db", fold=fold_messages)
    parent = empty_checkpoint()
    config = {"configurable": {**THREAD["configurable"], "checkpoint_id": parent["id"]}}
    # LangGraph may store a task's writes before the checkpoint they belong to is put.
    saver.put_writes(config, [("messages", [HumanMessage("first", id="h1")])], "task-a")
    saver.put(THREAD, parent, {}, {})
    saver.put_writes(config, [("messages", [AIMessage("second", id="a1")])], "task-b")
    _history(saver, config)  # the parent's, as the running step had it

    child = saver.put(config, empty_checkpoint(), {}, {})

    assert _texts(_history(saver, child)) == ["first", "second"]
    cold = sqlite_saver(tmp_path / "ferry.db", fold=fold_messages)
    assert _texts(_history(cold, child)) == ["first", "second"]


def test_a_parent_another_process_put_is_read_back_with_every_write(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    crashed = sqlite_saver(db, fold=fold_messages)
    resumed = sqlite_saver(db, fold=fold_messages)
    parent = empty_checkpoint()
    first = crashed.put(THREAD, parent, {}, {})
    call = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    crashed.put_writes(first, [("messages", [HumanMessage("q", id="h1"), call])], "task-a")
    # The process died here. Another one reads the thread, runs the remaining task, goes on.
    _history(resumed, first)
    result = ToolMessage("done", tool_call_id="c1", id="t1")
    resumed.put_writes(first, [("messages", [result])], "task-b")

    child = resumed.put(first, empty_checkpoint(), {}, {})

    assert _texts(_history(resumed, child)) == ["q", "", "done"]


def test_a_write_stored_before_under_the_same_task_leaves_the_history_to_the_file(
    tmp_path: Path,
) -> None:
    saver = sqlite_saver(tmp_path / "ferry.db", fold=fold_messages)
    config = saver.put(THREAD, empty_checkpoint(), {}, {})
    saver.put_writes(config, [("messages", [HumanMessage("kept", id="h1")])], "task-a")
    # The same task's write again (a retry): LangGraph's savers keep the first.
    saver.put_writes(config, [("messages", [HumanMessage("ignored", id="h2")])], "task-a")

    child = saver.put(config, empty_checkpoint(), {}, {})

    assert _texts(_history(saver, child)) == ["kept"]


def test_a_second_child_of_a_checkpoint_reads_its_writes_back(tmp_path: Path) -> None:
    saver = sqlite_saver(tmp_path / "ferry.db", fold=fold_messages)
    parent = saver.put(THREAD, empty_checkpoint(), {}, {})
    saver.put_writes(parent, [("messages", [HumanMessage("asked", id="h1")])], "task-a")
    _history(saver, parent)
    first = saver.put(parent, empty_checkpoint(), {}, {})
    assert _texts(_history(saver, first)) == ["asked"]

    # Time travel: the run goes on again from the same checkpoint, in the same process.
    second = saver.put(parent, empty_checkpoint(), {}, {})

    assert _texts(_history(saver, second)) == ["asked"]
