"""`ferry migrate` moves LangGraph's rows into Ferry's tables: a bad row costs its thread at most.

A row no saver could have written (a NULL id, an id that is bytes, a value that is text) is
left where it was and counted in the report; a row whose key Ferry's tables already hold never
replaces Ferry's. Every other thread in the file reads as it did.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from graph import build_graph
from graph.storage import sqlite_saver
from graph.storage.codec.serde import StoredValueError, serializer
from graph.storage.sqlite.migration import migrate
from tests.support.hostile_rows import (
    SPOILED_STOCK_ROWS,
    STOCK_COLUMNS,
    loosen_stock_tables,
    plant_stock_row,
    spoiled_stock_row,
)
from tests.support.scripted import ScriptedModel, answer

THREADS = ("t1", "t2", "bad")
FRESH_ID = "1f000000-0000-6000-8000-000000000001"  # a checkpoint id no thread has


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def _contents(saver: Any, thread_id: str) -> list[Any]:
    graph = build_graph(model=ScriptedModel([]), tools=[], checkpointer=saver)
    return [m.content for m in graph.get_state(_config(thread_id)).values["messages"]]


def _converse(saver: Any, *threads: str) -> None:
    graph = build_graph(
        model=ScriptedModel([answer(f"hello {t}") for t in threads]), tools=[], checkpointer=saver
    )
    for thread in threads:
        graph.invoke({"messages": [("user", f"hi from {thread}")]}, _config(thread))


def _rows(path: Path, table: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


@pytest.fixture
def stock_file(tmp_path: Path) -> Path:
    """Three threads as LangGraph's stock saver stored them (its own serializer: kept as is)."""
    path = tmp_path / "old.db"
    stock = SqliteSaver(
        sqlite3.connect(path, check_same_thread=False),
        serde=JsonPlusSerializer(pickle_fallback=True),
    )
    _converse(stock, *THREADS)
    stock.conn.close()
    return path


def _good_row(conn: sqlite3.Connection) -> dict[str, Any]:
    row = conn.execute(
        f"SELECT {', '.join(STOCK_COLUMNS['checkpoints'])} FROM checkpoints "
        "WHERE thread_id = 'bad' ORDER BY checkpoint_id DESC LIMIT 1"
    ).fetchone()
    return {**dict(zip(STOCK_COLUMNS["checkpoints"], row, strict=True)), "checkpoint_id": FRESH_ID}


@pytest.mark.parametrize("bad", sorted(SPOILED_STOCK_ROWS))
def test_a_row_no_saver_could_write_is_left_in_place_and_the_others_move(
    stock_file: Path, bad: str
) -> None:
    with closing(sqlite3.connect(stock_file)) as conn, conn:
        loosen_stock_tables(conn)
        table, columns = spoiled_stock_row(bad, _good_row(conn))
        plant_stock_row(conn, table, **columns)
    report = migrate(stock_file, everything=True)
    assert sorted(report.moved) == sorted(THREADS) and report.rows_left == 1
    saver = sqlite_saver(stock_file)
    assert _contents(saver, "t1") == ["hi from t1", "hello t1"]
    assert _contents(saver, "t2") == ["hi from t2", "hello t2"]
    try:
        _contents(saver, "bad")  # the bad row's own thread: read, or refused naming it
    except StoredValueError as refused:
        assert str(refused).startswith("thread bad: ")
    assert _rows(stock_file, table) == 1  # left in place, not deleted
    assert _rows(stock_file, "checkpoints" if table == "writes" else "writes") == 0
    again = migrate(stock_file, everything=True)  # tried again: left again, the others stay
    assert again.moved == {} and again.rows_left == 1
    assert _contents(sqlite_saver(stock_file), "t1") == ["hi from t1", "hello t1"]
    assert _rows(stock_file, table) == 1


def test_a_moved_row_never_replaces_one_of_ferrys(tmp_path: Path) -> None:
    """A stock row with a Ferry checkpoint's key (a stock saver used on the file again, or
    someone who can write it) is left where it is: Ferry's row and thread stay as they were."""
    path = tmp_path / "ferry.db"
    saver = sqlite_saver(path)
    _converse(saver, "t1", "t1")
    before = _contents(sqlite_saver(path), "t1")
    latest = saver.get_tuple(_config("t1"))
    assert latest is not None and latest.parent_config is not None
    parent = saver.get_tuple(latest.parent_config)
    assert parent is not None and parent.pending_writes
    task_id = parent.pending_writes[0][0]
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        SqliteSaver(conn).setup()  # LangGraph's tables, in the same file
        with conn:
            plant_stock_row(
                conn, "checkpoints", thread_id="t1", checkpoint_ns="",
                checkpoint_id=latest.config["configurable"]["checkpoint_id"],
                type="msgpack", checkpoint=serializer().dumps_typed({"planted": True})[1],
                metadata="{}",
            )  # fmt: skip
            plant_stock_row(
                conn, "writes", thread_id="t1", checkpoint_ns="",
                checkpoint_id=parent.config["configurable"]["checkpoint_id"], task_id=task_id,
                task_path="", idx=0, channel="messages", type="msgpack",
                value=serializer().dumps_typed(["planted"])[1],
            )  # fmt: skip
    report = migrate(path, everything=True)
    assert report.moved == {} and report.rows_left == 2 and report.rows_left_threads == ["t1"]
    reopened = sqlite_saver(path)
    assert _contents(reopened, "t1") == before
    assert reopened.get_tuple(_config("t1")) == latest
    assert _rows(path, "checkpoints") == 1 and _rows(path, "writes") == 1
