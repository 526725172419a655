"""The server's savers delete a thread whole, Ferry's own rows included, as the CLI's do."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from graph.server.checkpointer import checkpointer


def test_deleting_a_thread_on_the_server_removes_ferrys_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ferry.db"
    monkeypatch.setenv("FERRY_DB", str(db))

    async def delete_on_the_server() -> None:
        async with checkpointer() as saver:
            conn = sqlite3.connect(db)
            with conn:
                conn.execute("INSERT INTO ferry_started_calls VALUES ('t1', 'c1'), ('t2', 'c2')")
                conn.execute(
                    "INSERT INTO ferry_histories VALUES ('t1', '', 'x', 1, 'null', x''), "
                    "('t2', '', 'x', 1, 'null', x'')"
                )
            conn.close()
            await saver.adelete_thread("t1")

    asyncio.run(delete_on_the_server())
    conn = sqlite3.connect(db)
    started = conn.execute("SELECT thread_id FROM ferry_started_calls").fetchall()
    saved = conn.execute("SELECT thread_id FROM ferry_histories").fetchall()
    conn.close()
    assert started == saved == [("t2",)]
