"""A checkpoint row's metadata: LangGraph's JSON, compact, without the messages' superstep bound."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from langgraph.checkpoint.base import empty_checkpoint

from graph.storage import FerrySaver

CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def test_metadata_is_compact_and_messages_never_reach_the_superstep_bound(tmp_path: Path) -> None:
    saver = FerrySaver(sqlite3.connect(tmp_path / "ferry.db", check_same_thread=False))
    checkpoint = empty_checkpoint()
    counters = {"messages": (7, 4999), "notes": (1, 4999)}
    metadata = {"source": "loop", "step": 3, "counters_since_delta_snapshot": counters}
    saver.put(CONFIG, checkpoint, metadata, {})  # type: ignore[arg-type]

    [(stored,)] = saver.conn.execute("SELECT metadata FROM checkpoints").fetchall()
    assert b", " not in stored and b": " not in stored
    # The update count stays (a channel's own snapshot cadence); only the supersteps are reset,
    # and only for `messages`, whose replay Ferry's saved histories bound.
    assert json.loads(stored)["counters_since_delta_snapshot"] == {
        "messages": [7, 0],
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
