"""A step's metadata: stored inside its value, as LangGraph gave it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.checkpoint.base import empty_checkpoint

from graph.storage import FerrySaver
from tests.support.stored import step_values

CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def test_a_steps_metadata_is_stored_inside_its_value_as_put(tmp_path: Path) -> None:
    saver = FerrySaver(sqlite3.connect(tmp_path / "ferry.db", check_same_thread=False))
    checkpoint = empty_checkpoint()
    counters = {"messages": (7, 4999), "notes": (1, 4999)}
    metadata = {"source": "loop", "step": 3, "counters_since_delta_snapshot": counters}
    saver.put(CONFIG, checkpoint, metadata, {})  # type: ignore[arg-type]

    [(value, legacy)] = step_values(saver.conn)
    assert legacy is None  # Ferry's own row: the metadata is in the value, not beside it
    stored_checkpoint, stored_metadata = saver.serde.loads_typed(value)
    assert "id" not in stored_checkpoint  # the id is the row's key
    assert stored_metadata["counters_since_delta_snapshot"] == {
        "messages": [7, 4999],
        "notes": [1, 4999],
    }
    saved = saver.get_tuple({"configurable": {"thread_id": "t1"}})
    assert saved is not None and saved.checkpoint["id"] == checkpoint["id"]
    assert saved.metadata["step"] == 3 and saved.metadata["source"] == "loop"


def test_metadata_filters_still_match(tmp_path: Path) -> None:
    saver = FerrySaver(sqlite3.connect(tmp_path / "ferry.db", check_same_thread=False))
    saver.put(CONFIG, empty_checkpoint(), {"source": "input", "step": -1}, {})  # type: ignore[arg-type]
    found = list(saver.list(None, filter={"source": "input", "step": -1}))
    assert len(found) == 1
