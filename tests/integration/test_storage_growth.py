"""A thread's SQLite file grows with its conversation, not with the conversation's square.

Structural, not timed: the bytes one more turn adds to the database late in a thread are compared
with the bytes one more turn added early on. Quadratic storage (every checkpoint holding the whole
message list) makes the late figure about as many times larger as the thread is longer.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from graph import build_graph
from graph.settings import Settings
from graph.storage import sqlite_saver
from tests.support.growth import bytes_per_turn, sqlite_stored_bytes
from tests.support.scripted import ScriptedModel, answer, tool_call

ROUNDS = 3  # tool calls per turn, one after the other
EARLY, LATE, SPAN = 5, 40, 2  # growth is averaged over SPAN turns after EARLY and after LATE


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


def test_bytes_per_turn_do_not_grow_with_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "growth.db"
    turns = LATE + SPAN
    model = ScriptedModel(_script(turns))
    settings = Settings(db=path, max_iterations=50)
    graph = build_graph(
        model=model, tools=[fetch_blob], checkpointer=sqlite_saver(path), settings=settings
    )
    early, late, result = bytes_per_turn(
        graph, lambda: sqlite_stored_bytes(path), early=EARLY, late=LATE, span=SPAN
    )
    model.assert_complete()
    assert len(result["messages"]) == turns * (2 + 2 * ROUNDS)
    assert late <= 1.5 * early, (
        f"a turn adds {late:.0f} B at turn ~{LATE}, {early:.0f} B at ~{EARLY}"
    )
    conn = sqlite3.connect(path)
    saved = conn.execute("SELECT thread_id FROM ferry_histories").fetchall()
    conn.close()
    assert saved == [("growth",)]  # one saved copy of the history, not one per renewal
