"""Several writers on one file, each with its own connection, as several processes would be.

A transaction that reads and then writes must take the file's write lock first: one that read
first would fail at once ("database is locked", which the busy timeout does not wait out) if
another writer committed in between. Storing a history's part is such a transaction.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from graph import build_graph
from graph.storage import sqlite_saver
from graph.storage.history.messages import PART
from graph.storage.sqlite import parts
from tests.support.scripted import ScriptedModel, answer


def _run(db: Path, thread_id: str, turns: int, errors: list[BaseException]) -> None:
    model = ScriptedModel([answer(f"{thread_id} answer {n}") for n in range(turns)])
    graph = build_graph(model=model, tools=[], checkpointer=sqlite_saver(db))
    config: Any = {"configurable": {"thread_id": thread_id}}
    try:
        for n in range(turns):
            graph.invoke({"messages": [HumanMessage(f"{thread_id} question {n}")]}, config)
    except BaseException as error:  # noqa: BLE001 - reported by the test
        errors.append(error)


def test_storing_a_part_takes_the_write_lock_before_it_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = sqlite_saver(tmp_path / "ferry.db")
    seen: list[bool] = []
    index = parts.index

    def checked(cur: Any, number: int, namespace: str) -> parts.Index:
        seen.append(cur.connection.in_transaction)
        return index(cur, number, namespace)

    monkeypatch.setattr(parts, "index", checked)
    turns = PART // 2 + 1  # two messages a turn: past a part's worth
    model = ScriptedModel([answer(f"answer {n}") for n in range(turns)])
    graph = build_graph(model=model, tools=[], checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    for n in range(turns):
        graph.invoke({"messages": [HumanMessage(f"question {n}")]}, config)

    assert seen, "the thread grew past a part's worth of messages"
    assert all(seen)


def test_writers_on_their_own_connections_lose_no_turn(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    turns = PART // 2 + 4  # every thread stores a part while the others write
    errors: list[BaseException] = []
    workers = [
        threading.Thread(target=_run, args=(db, f"writer-{i}", turns, errors)) for i in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    reader = sqlite_saver(db)
    for i in range(4):
        config: Any = {"configurable": {"thread_id": f"writer-{i}"}}
        state = build_graph(model=ScriptedModel([]), tools=[], checkpointer=reader).get_state(
            config
        )
        assert len(state.values["messages"]) == 2 * turns
