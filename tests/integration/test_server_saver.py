"""The server's savers delete a thread whole, Ferry's own rows included, as the CLI's do."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from graph import build_graph
from graph.server.checkpointer import checkpointer
from graph.storage import FerrySaver, sqlite_saver
from tests.support.scripted import ScriptedModel, answer
from tests.support.stored import write_records


def test_deleting_a_thread_on_the_server_removes_ferrys_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ferry.db"
    monkeypatch.setenv("FERRY_DB", str(db))
    model = ScriptedModel([answer("a1"), answer("a2")])
    graph = build_graph(model=model, tools=[], checkpointer=sqlite_saver(db))
    for thread in ("t1", "t2"):
        graph.invoke({"messages": [("user", "q")]}, {"configurable": {"thread_id": thread}})

    async def delete_on_the_server() -> None:
        async with checkpointer() as saver:
            assert isinstance(saver, FerrySaver)
            with closing(sqlite3.connect(db)) as conn, conn:
                conn.execute("INSERT INTO ferry_started_calls VALUES ('t1', 'c1'), ('t2', 'c2')")
            await saver.adelete_thread("t1")

    asyncio.run(delete_on_the_server())
    with closing(sqlite3.connect(db)) as conn:
        started = conn.execute("SELECT thread_id FROM ferry_started_calls").fetchall()
        summaries = conn.execute("SELECT thread_id FROM ferry_thread_summaries").fetchall()
        writes = {owner for owner, _ in write_records(conn)}
    assert started == summaries == [("t2",)]
    assert sqlite_saver(db).thread_ids() == ["t2"] and writes == {"t2"}
