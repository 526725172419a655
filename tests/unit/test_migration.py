"""Files from before Ferry's layout: rows in LangGraph's tables, moved by `ferry migrate` only.

What a user would notice if the move went wrong: a thread whose messages or checkpoints differ
once Ferry reads it, or that cannot be continued; a file changed by only opening or reading it;
a read-only file changed, or continued in memory only; rows doubled when two conversions run at
once; no backup, or one that is not the file as it was.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from graph import build_graph
from graph.storage import FerrySaver, sqlite_saver
from graph.storage.sqlite.migration import MigrationError, migrate
from tests.support.scripted import ScriptedModel, answer, tool_call
from tests.support.stored import step_values, write_records

THREADS = ("t1", "t2")


@tool
def lookup(n: int) -> str:
    """Look up record n.

    Args:
        n: the record number.
    """
    return f"record {n}"


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


@dataclass
class OldFile:
    """A file in LangGraph's layout, and what LangGraph's own saver read from it."""

    path: Path
    messages: dict[str, list[tuple[str, Any, Any]]]  # each thread's (type, content, id)
    checkpoints: dict[str, list[str]]  # each thread's checkpoint ids, newest first
    rows: tuple[int, int]  # rows in `checkpoints` and `writes`


def _messages(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[tuple[str, Any, Any]]:
    graph = build_graph(model=ScriptedModel([]), tools=[lookup], checkpointer=saver)
    return [
        (m.type, m.content, m.id)
        for m in graph.get_state(_config(thread_id)).values.get("messages", [])
    ]


def _checkpoint_ids(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[str]:
    return [c.config["configurable"]["checkpoint_id"] for c in saver.list(_config(thread_id))]


def _langgraph_rows(conn: sqlite3.Connection) -> tuple[int, int]:
    """How many rows LangGraph's `checkpoints` and `writes` hold."""
    (checkpoints,) = conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
    (writes,) = conn.execute("SELECT COUNT(*) FROM writes").fetchone()
    return int(checkpoints), int(writes)


@pytest.fixture
def old_file(tmp_path: Path) -> OldFile:
    """Ferry's graph run 2 turns (a tool call each) on 2 threads by LangGraph's stock saver.

    Its own serializer keeps it as given (`graph.storage.sqlite.stock`): LangGraph's tables and
    format.
    """
    path = tmp_path / "old.db"
    stock = SqliteSaver(
        sqlite3.connect(path, check_same_thread=False),
        serde=JsonPlusSerializer(pickle_fallback=True),
    )
    steps: list[Any] = []
    for turn in range(2 * len(THREADS)):
        steps += [tool_call("lookup", n=turn), answer(f"answer {turn}")]
    graph = build_graph(model=ScriptedModel(steps), tools=[lookup], checkpointer=stock)
    assert graph.checkpointer is stock
    for thread_id in THREADS:
        for turn in range(2):
            graph.invoke({"messages": [("user", f"{thread_id} q{turn}")]}, _config(thread_id))
    old = OldFile(
        path,
        {t: _messages(stock, t) for t in THREADS},
        {t: _checkpoint_ids(stock, t) for t in THREADS},
        _langgraph_rows(stock.conn),
    )
    stock.conn.close()  # the last connection: its -wal and -shm go
    assert len(old.messages["t1"]) == 8 and old.rows[0] > 0 and old.rows[1] > 0
    return old


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _assert_reads_the_same(saver: FerrySaver, old: OldFile) -> None:
    assert sorted(saver.thread_ids()) == sorted(THREADS)
    for thread_id in THREADS:
        assert _checkpoint_ids(saver, thread_id) == old.checkpoints[thread_id]
        assert _messages(saver, thread_id) == old.messages[thread_id]


def _assert_as_the_stock_saver_wrote_it(path: Path, old: OldFile) -> None:
    stock = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    for thread_id in THREADS:
        assert _checkpoint_ids(stock, thread_id) == old.checkpoints[thread_id]
    with closing(stock.conn):
        assert _langgraph_rows(stock.conn) == old.rows


def test_opening_and_reading_an_old_file_moves_nothing_and_says_so_once(
    old_file: OldFile, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ferry.saver"):
        for _ in range(2):
            saver = sqlite_saver(old_file.path)
            assert saver.thread_ids() == [] and saver.get_tuple(_config("t1")) is None
    _assert_as_the_stock_saver_wrote_it(old_file.path, old_file)
    notices = [r.getMessage() for r in caplog.records if "ferry migrate" in r.getMessage()]
    assert len(notices) == 1 and str(old_file.path) in notices[0]
    assert "2 thread(s) in LangGraph's tables" in notices[0]


def test_an_old_file_migrated_reads_the_same_and_continues_in_ferrys_tables(
    old_file: OldFile,
) -> None:
    moved: list[tuple[str, int]] = []
    report = migrate(old_file.path, on_thread=lambda t, n: moved.append((t, n)))
    assert report.moved == {t: len(old_file.checkpoints[t]) for t in THREADS}
    assert moved == sorted(report.moved.items()) and report.left == {}
    assert report.backup is not None and report.backup.name.startswith("old.db.before-migrate-")
    _assert_as_the_stock_saver_wrote_it(report.backup, old_file)  # the file as it was
    saver = sqlite_saver(old_file.path)
    _assert_reads_the_same(saver, old_file)
    with closing(sqlite3.connect(old_file.path)) as conn:
        assert _langgraph_rows(conn) == (0, 0)  # moved, not copied
        assert len(step_values(conn)) == old_file.rows[0]
        assert len(write_records(conn)) == old_file.rows[1]

    graph = build_graph(
        model=ScriptedModel([answer("answer 4")]), tools=[lookup], checkpointer=saver
    )
    result = graph.invoke({"messages": [("user", "t1 q2")]}, _config("t1"))
    continued = [m.content for m in result["messages"]]
    assert continued == [content for _, content, _ in old_file.messages["t1"]] + [
        "t1 q2",
        "answer 4",
    ]
    # A new process reads the continued thread, and the other one as it was.
    reopened = sqlite_saver(old_file.path)
    assert [content for _, content, _ in _messages(reopened, "t1")] == continued
    assert _messages(reopened, "t2") == old_file.messages["t2"]
    assert (
        _checkpoint_ids(reopened, "t1")[-len(old_file.checkpoints["t1"]) :]
        == (old_file.checkpoints["t1"])
    )
    assert migrate(old_file.path).moved == {}  # again: nothing left to move, no new backup


def test_a_read_only_old_file_is_refused_and_stays_as_it_was(old_file: OldFile) -> None:
    path = old_file.path
    assert not path.with_name("old.db-wal").exists() and not path.with_name("old.db-shm").exists()
    before = _digest(path)
    path.chmod(0o444)
    try:
        with pytest.raises(MigrationError, match="read-only: migrate rewrites it") as refused:
            migrate(path)
        assert "\n" not in str(refused.value) and str(path) in str(refused.value)
        assert sqlite_saver(path).thread_ids() == []  # read: nothing of Ferry's, nothing moved
    finally:
        path.chmod(0o644)
    assert _digest(path) == before
    assert list(path.parent.glob("*before-migrate*")) == []
    _assert_as_the_stock_saver_wrote_it(path, old_file)


def test_a_missing_file_is_refused_and_not_created(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="no such file"):
        migrate(tmp_path / "nothing.db")
    assert list(tmp_path.iterdir()) == []


def _ferry_file(path: Path) -> Path:
    graph = build_graph(
        model=ScriptedModel([answer("answer 0")]), tools=[lookup], checkpointer=sqlite_saver(path)
    )
    graph.invoke({"messages": [("user", "t1 q0")]}, _config("t1"))
    return path


@pytest.mark.parametrize("layout", ["ferry", "langgraph"])
def test_a_read_only_file_is_not_continued_whichever_its_layout(
    old_file: OldFile, tmp_path: Path, layout: str
) -> None:
    """A turn on a read-only file is refused: never answered, then lost with the process.

    An old file is read from a copy in memory (Ferry's tables empty: nothing of LangGraph's
    moved into it); a turn must not be taken in that copy either.
    """
    if layout == "ferry":
        path = _ferry_file(tmp_path / "ferry.db")
        expected = _messages(sqlite_saver(path), "t1")
    else:
        path, expected = old_file.path, []
    path.chmod(0o444)
    try:
        graph = build_graph(
            model=ScriptedModel([]), tools=[lookup], checkpointer=sqlite_saver(path)
        )
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            graph.invoke({"messages": [("user", "t1 q9")]}, _config("t1"))
    finally:
        path.chmod(0o644)
    assert _messages(sqlite_saver(path), "t1") == expected


def test_two_migrations_at_once_move_its_rows_once(old_file: OldFile) -> None:
    start = threading.Barrier(2)
    failures: list[BaseException] = []
    moved: list[dict[str, int]] = []

    def convert() -> None:
        start.wait()
        try:
            moved.append(migrate(old_file.path).moved)
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            failures.append(error)

    workers = [threading.Thread(target=convert) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert failures == []
    with closing(sqlite3.connect(old_file.path)) as conn:
        assert _langgraph_rows(conn) == (0, 0)
        assert len(step_values(conn)) == old_file.rows[0]
        assert len(write_records(conn)) == old_file.rows[1]
        threads = conn.execute("SELECT thread_id FROM ferry_threads").fetchall()
    assert sorted(t for (t,) in threads) == sorted(THREADS)
    assert sorted(moved, key=len) == [{}, {t: len(old_file.checkpoints[t]) for t in THREADS}]
    _assert_reads_the_same(sqlite_saver(old_file.path), old_file)
