"""`ferry threads` reads one summary row per thread instead of rebuilding every history.

What a user would notice if the rows went wrong: a listing that differs from the threads'
histories, a thread missing or stale after it was continued, deleted or written before the
rows existed, or a planted row taken for more than text.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from graph import build_graph
from graph.cli import main
from graph.state import fold_messages
from graph.storage import FerrySaver, sqlite_saver
from graph.storage.sqlite import layout
from graph.storage.sqlite.migration import migrate
from graph.storage.threads.reading import list_threads, stored_messages, title_of
from tests.support.hostile_rows import PLANTED_MODULE
from tests.support.scripted import ScriptedModel, answer, tool_call


@tool
def lookup(n: int) -> str:
    """Look up record n.

    Args:
        n: the record number.
    """
    return f"record {n}"


def _listing_saver(db: Path) -> FerrySaver:
    """A saver on `db` as `ferry threads` opens one: with Ferry's reducer."""
    return sqlite_saver(db, fold=fold_messages)


def _converse(
    db: Path, turns: dict[str, int], saver: BaseCheckpointSaver[Any] | None = None
) -> None:
    """Each thread in order, `turns[thread]` turns of question, call, result and answer."""
    steps: list[Any] = []
    for count in turns.values():
        for turn in range(count):
            steps += [tool_call("lookup", n=turn), answer(f"answer {turn}")]
    checkpointer = saver or sqlite_saver(db)
    graph = build_graph(model=ScriptedModel(steps), tools=[lookup], checkpointer=checkpointer)
    for thread, count in turns.items():
        for turn in range(count):
            graph.invoke(
                {"messages": [("user", f"{thread} question {turn}")]},
                {"configurable": {"thread_id": thread}},
            )


def _rows(db: Path) -> dict[str, tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        found = conn.execute("SELECT * FROM ferry_thread_summaries").fetchall()
    return {row[0]: row[1:] for row in found}


def _sql(db: Path, statement: str, *params: Any) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(statement, params)


def _rebuilt(saver: FerrySaver) -> list[dict[str, Any]]:
    """What the listing must show: each thread's summary from its rebuilt history."""
    threads = []
    for thread_id in saver.thread_ids():
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        assert latest is not None
        messages = stored_messages(saver, latest)
        threads.append(
            {"thread_id": thread_id, "updated_at": latest.checkpoint["ts"],
             "messages": len(messages), "title": title_of(messages)}
        )  # fmt: skip
    return sorted(threads, key=lambda t: t["updated_at"], reverse=True)


class _NoRebuilds(FerrySaver):
    """Fails the test if the listing rebuilds a history."""

    def get_delta_channel_history(self, **kwargs: Any) -> Any:
        raise AssertionError("a history was rebuilt for the listing")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ferry.db"
    _converse(path, {"older": 2, "newer": 1})
    return path


def test_each_step_keeps_its_threads_summary_and_the_listing_rebuilds_nothing(db: Path) -> None:
    expected = _rebuilt(_listing_saver(db))
    listed = list_threads(_NoRebuilds(sqlite3.connect(db, check_same_thread=False)))
    assert listed == expected
    assert [(t["thread_id"], t["messages"], t["title"]) for t in listed] == [
        ("newer", 4, "newer question 0"),
        ("older", 8, "older question 0"),
    ]
    saver = sqlite_saver(db)
    newest = {}
    for thread_id in ("older", "newer"):
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        assert latest is not None
        newest[thread_id] = layout.key_of(latest.config["configurable"]["checkpoint_id"])
    assert {thread: row[0] for thread, row in _rows(db).items()} == newest


def test_a_thread_without_a_current_summary_is_rebuilt_once_and_its_row_rewritten(
    db: Path,
) -> None:
    expected = _rebuilt(_listing_saver(db))
    _sql(db, "DELETE FROM ferry_thread_summaries WHERE thread_id = 'older'")
    _sql(db, "UPDATE ferry_thread_summaries SET checkpoint_id = 'stale', messages = 99")

    assert list_threads(_listing_saver(db)) == expected
    assert set(_rows(db)) == {"older", "newer"}
    assert list_threads(_NoRebuilds(sqlite3.connect(db, check_same_thread=False))) == expected


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_from_before_the_summaries_lists_the_same_once_migrated(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Written in LangGraph's tables (a stock saver, kept as given): no summary rows, no layout.
    db = tmp_path / "old.db"
    stock = SqliteSaver(
        sqlite3.connect(db, check_same_thread=False), serde=JsonPlusSerializer(pickle_fallback=True)
    )
    _converse(db, {"older": 2, "newer": 1}, saver=stock)
    stock.conn.close()
    shutil.copy(db, tmp_path / "copy.db")
    migrate(tmp_path / "copy.db")
    expected = _rebuilt(_listing_saver(tmp_path / "copy.db"))
    assert [t["thread_id"] for t in expected] == ["newer", "older"]

    before = _digest(db)
    monkeypatch.setenv("FERRY_DB", str(db))
    db.chmod(0o444)
    try:  # read-only: listed as it is (nothing in Ferry's tables), and said why
        assert main(["threads", "--json"]) == 0
    finally:
        db.chmod(0o644)
    assert json.loads(capsys.readouterr().out)["threads"] == []
    assert f"{db} holds 2 thread(s) in LangGraph's tables" in caplog.text
    assert _digest(db) == before  # read from a copy: the file is as it was
    assert main(["migrate", str(db)]) == 0
    assert list_threads(_listing_saver(db)) == expected  # migrated: the rows written on listing
    assert set(_rows(db)) == {"older", "newer"}


def test_continuing_deleting_and_pruning_a_thread_keep_the_rows_true(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _converse(db, {"older": 1})
    assert [(t["thread_id"], t["messages"]) for t in list_threads(_listing_saver(db))] == [
        ("older", 12),
        ("newer", 4),
    ]
    sqlite_saver(db).delete_thread("older")
    assert set(_rows(db)) == {"newer"}
    monkeypatch.setenv("FERRY_DB", str(db))
    assert main(["prune", "--before", "2999-01-01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["threads_deleted"] == ["newer"]
    assert _rows(db) == {}


@pytest.mark.parametrize(
    ("column", "planted"),
    [("messages", "os.system"), ("messages", -1), ("title", b"\x80"), ("updated_at", "yesterday")],
)
def test_a_summary_of_the_wrong_shape_is_not_trusted(db: Path, column: str, planted: Any) -> None:
    expected = _rebuilt(_listing_saver(db))
    _sql(db, f"UPDATE ferry_thread_summaries SET {column} = ?", planted)
    assert list_threads(_listing_saver(db)) == expected


def test_a_planted_title_is_text_shown_escaped_and_runs_nothing(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    title = f"\x1b]0;owned\x07__import__('{PLANTED_MODULE}')"
    _sql(db, "UPDATE ferry_thread_summaries SET title = ? WHERE thread_id = 'newer'", title)
    monkeypatch.setenv("FERRY_DB", str(db))

    assert main(["threads", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"][0]["title"] == title
    assert main(["threads"]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown and PLANTED_MODULE in shown
    assert PLANTED_MODULE not in sys.modules


def test_with_a_key_the_title_is_stored_sealed_and_listed_without_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", "0123456789abcdef0123456789abcdef")
    db = tmp_path / "ferry.db"
    _converse(db, {"secret": 1})
    [(_, _, _, title, title_type)] = _rows(db).values()
    assert "secret question" not in title and title_type.endswith("+aes")

    listed = list_threads(_NoRebuilds(sqlite3.connect(db, check_same_thread=False)))
    assert [t["title"] for t in listed] == ["secret question 0"]

    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", "another key of 32 characters!!!!")
    assert list_threads(_listing_saver(db)) == []  # not opened: rebuilt, refused, left out
