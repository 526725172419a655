"""What a deleted run left on the checkpoint it started from goes with it (`delete_for_runs`).

LangGraph stores a delta channel's input on the checkpoint a run starts from, under a task id
made from that checkpoint's id: the next run from it reuses the id, so a question left there
would be read in place of the next one. The writes of the checkpoint's own tasks stay.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from langgraph.checkpoint.base import empty_checkpoint

from graph.storage.internals import run_writes_on_start
from graph.storage.sqlite.saver import FerrySaver, connect


def _put(saver: FerrySaver, parent: dict | None, run_id: str) -> dict:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = empty_checkpoint()
    return saver.put(config, checkpoint, {"run_id": run_id, "source": "loop", "step": 0}, {})


def test_a_deleted_runs_input_on_its_start_goes_and_the_starts_own_writes_stay(
    tmp_path: Path,
) -> None:
    saver = FerrySaver(connect(tmp_path / "ferry.db"))
    start = _put(saver, None, "earlier")
    own_task = str(uuid.uuid4())
    saver.put_writes(start, [("stop_reason", "answered")], own_task)
    input_task, null_task = run_writes_on_start(start["configurable"]["checkpoint_id"])
    saver.put_writes(start, [("question", "the rolled-back question")], input_task)
    saver.put_writes(start, [("question", "a resume value")], null_task)
    rolled_back = _put(saver, start, "rolled-back")
    _put(saver, rolled_back, "rolled-back")

    saver.delete_for_runs(["rolled-back"])

    kept = [(t.metadata["run_id"], t.pending_writes) for t in saver.list(None)]
    assert kept == [("earlier", [(own_task, "stop_reason", "answered")])]
    saver.put_writes(start, [("question", "the next question")], input_task)
    assert (input_task, "question", "the next question") in saver.get_tuple(start).pending_writes


def test_a_start_another_run_went_on_from_keeps_its_writes(tmp_path: Path) -> None:
    saver = FerrySaver(connect(tmp_path / "ferry.db"))
    start = _put(saver, None, "earlier")
    input_task, _ = run_writes_on_start(start["configurable"]["checkpoint_id"])
    saver.put_writes(start, [("question", "the kept run's question")], input_task)
    _put(saver, start, "kept")
    _put(saver, start, "rolled-back")

    saver.delete_for_runs(["rolled-back"])

    assert sorted(t.metadata["run_id"] for t in saver.list(None)) == ["earlier", "kept"]
    assert saver.get_tuple(start).pending_writes == [
        (input_task, "question", "the kept run's question")
    ]
