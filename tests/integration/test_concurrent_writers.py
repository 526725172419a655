"""Several writers on one file, each with its own connection, as several processes would be.

A new file opened by several at once is turned to WAL, and its memory store set up, by one.

A transaction that reads and then writes must take the file's write lock first: one that read
first would fail at once ("database is locked", which the busy timeout does not wait out) if
another writer committed in between. Storing a history's part is such a transaction.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.sqlite import SqliteStore

from graph import build_graph
from graph.storage import sqlite_saver
from graph.storage.history.messages import PART
from graph.storage.sqlite import parts
from graph.storage.sqlite.saver import connect
from graph.storage.stores import open_store, set_up_store
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


def test_connections_opening_a_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    # Turning a new file to WAL answers "database is locked" without waiting on SQLite's busy
    # handler: before `connect` waited there, about one round in fifteen failed an opener.
    for round_ in range(100):
        db, start = tmp_path / f"new-{round_}.db", threading.Barrier(4)

        def open_it(db: Path = db, start: threading.Barrier = start) -> str:
            start.wait()
            conn = connect(db)
            try:
                return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
            finally:
                conn.close()

        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(lambda _: open_it(), range(4))) == ["wal"] * 4


def test_stores_opened_on_a_new_file_at_once_each_find_their_tables(tmp_path: Path) -> None:
    # LangGraph's store setup applies each migration on its own: two at once applied one twice
    # ("UNIQUE constraint failed: store_migrations.v", "duplicate column name").
    for round_ in range(10):
        db, start = tmp_path / f"new-{round_}.db", threading.Barrier(4)

        def remember(index: int, db: Path = db, start: threading.Barrier = start) -> None:
            start.wait()
            with open_store(db) as store:
                store.put(("memories",), f"key-{index}", {"text": f"memory {index}"})

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(remember, range(4)))
        with open_store(db) as store:
            keys = {item.key for item in store.search(("memories",), limit=10)}
        assert keys == {f"key-{i}" for i in range(4)}


def test_the_store_tables_are_the_ones_langgraph_sets_up(tmp_path: Path) -> None:
    # Ferry applies LangGraph's own migrations in one transaction; the file must end as
    # `SqliteStore.setup` leaves it, from new and from a file it had set up part of the way.
    def layout(db: Path) -> tuple[list[Any], list[Any]]:
        conn = sqlite3.connect(db)
        try:
            ledger = conn.execute("SELECT v FROM store_migrations ORDER BY v").fetchall()
            schema = conn.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name LIKE '%store%' ORDER BY name"
            ).fetchall()
            return ledger, [
                (kind, name, "".join((sql or "").split())) for kind, name, sql in schema
            ]
        finally:
            conn.close()

    theirs = tmp_path / "theirs.db"
    SqliteStore(sqlite3.connect(theirs, isolation_level=None)).setup()
    partly = tmp_path / "partly.db"
    conn = sqlite3.connect(partly, isolation_level=None)
    conn.execute("CREATE TABLE store_migrations (v INTEGER PRIMARY KEY)")
    for version, statement in enumerate(SqliteStore.MIGRATIONS[:2]):
        conn.execute(statement)
        conn.execute("INSERT INTO store_migrations (v) VALUES (?)", (version,))
    conn.close()

    for db in (tmp_path / "new.db", partly):
        set_up_store(db)
        assert layout(db) == layout(theirs)
        with open_store(db) as store:  # LangGraph's setup finds nothing left to do
            store.put(("memories",), "k", {"text": "kept"}, ttl=5)
            assert store.get(("memories",), "k") is not None
