"""A thread's SQLite file grows with its conversation, not with the conversation's square.

Structural, not timed: the bytes one more turn adds to the database late in a thread are compared
with the bytes one more turn added early on. Quadratic storage (every checkpoint holding the whole
message list) makes the late figure about as many times larger as the thread is longer. So does
LangGraph's periodic snapshot of a delta channel (every 5000 supersteps, ~380 bench turns: the
whole history again each time); the test lowers that bound so a short thread would reach it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from graph import build_graph
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.threads.reading import message_record
from tests.support.growth import bytes_per_turn, sqlite_all_bytes, sqlite_stored_bytes
from tests.support.scripted import ScriptedModel, answer, tool_call
from tests.support.stored import step_values

ROUNDS = 3  # tool calls per turn, one after the other
EARLY, LATE, SPAN = 5, 40, 2  # growth is averaged over SPAN turns after EARLY and after LATE
SUPERSTEP_BOUND = 60  # LangGraph's is 5000; 60 supersteps are under 5 turns here
# All stored bytes (keys, bookkeeping) over the messages' raw bytes; measured 0.93 to 0.97
# (values are compressed), and 1.03 since every step also keeps check's marks of the calls it
# released (about 40 B: the channel's version and a 16-digit mark, graph.provenance); 1.95 in
# LangGraph's tables, whose rows repeat the thread's and steps' ids.
AMPLIFICATION = 1.06


@tool
def fetch_blob(n: int) -> str:
    """Fetch record number n (about 2 KB of text).

    Args:
        n: the record number.
    """
    digest = hashlib.sha256(str(n).encode()).digest()
    words = []
    for _ in range(128):
        digest = hashlib.sha256(digest).digest()
        words.append(digest.hex()[:15])
    return " ".join(words)[:2048]


def _script(turns: int) -> list[AIMessage]:
    steps = []
    for turn in range(1, turns + 1):
        steps += [tool_call("fetch_blob", n=turn * ROUNDS + i) for i in range(ROUNDS)]
        steps.append(answer(f"Summary of question {turn}."))
    return steps


def _raw_bytes(messages: list[Any]) -> int:
    """The bench's raw size of a conversation (bench/README.md): its `history --json` records."""
    return sum(
        len(json.dumps(message_record(m), ensure_ascii=False, separators=(",", ":")).encode())
        for m in messages
    )


def _snapshots(path: Path, serde: Any) -> int:
    """How many stored steps hold the messages themselves (the whole history again)."""
    with closing(sqlite3.connect(path)) as conn:
        values = step_values(conn)
    return sum("messages" in serde.loads_typed(value)[0]["channel_values"] for value, _ in values)


def test_bytes_per_turn_do_not_grow_with_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "langgraph.pregel._checkpoint.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT", SUPERSTEP_BOUND
    )
    path = tmp_path / "growth.db"
    turns = LATE + SPAN
    model = ScriptedModel(_script(turns))
    settings = Settings(db=path, max_iterations=50)
    saver = sqlite_saver(path)
    graph = build_graph(model=model, tools=[fetch_blob], checkpointer=saver, settings=settings)
    early, late, result = bytes_per_turn(
        graph, lambda: sqlite_stored_bytes(path), early=EARLY, late=LATE, span=SPAN
    )
    model.assert_complete()
    assert len(result["messages"]) == turns * (2 + 2 * ROUNDS)
    assert late <= 1.5 * early, (
        f"a turn adds {late:.0f} B at turn ~{LATE}, {early:.0f} B at ~{EARLY}"
    )
    assert _snapshots(path, saver.serde) == 0  # the messages are only ever the steps' writes
    amplification = sqlite_all_bytes(path) / _raw_bytes(result["messages"])
    assert amplification <= AMPLIFICATION, f"{amplification:.2f}× the messages' bytes"
