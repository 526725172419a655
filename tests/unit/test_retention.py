"""Pruning and deleting keep what a resume and the history need, and give space back."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from graph import build_graph
from graph.core.settings import Settings
from graph.state import fold_messages
from graph.storage import sqlite_saver
from tests.support.cli_helpers import Ferry
from tests.support.scripted import ScriptedModel, answer, tool_call


@tool
def echo(text: str) -> str:
    """Echo the text.

    Args:
        text: what to echo.
    """
    # Hash words: stored compressed, they still take real space, so compaction shows.
    return " ".join(hashlib.sha256(f"{text}{i}".encode()).hexdigest() for i in range(40))


def _conversation(db: Path, thread: str, turns: int) -> Any:
    steps: list[Any] = []
    for i in range(turns):
        steps += [tool_call("echo", text=f"t{i}"), answer(f"answer {i}")]
    graph = build_graph(
        model=ScriptedModel(steps), tools=[echo], checkpointer=sqlite_saver(db), settings=Settings()
    )
    for i in range(turns):
        graph.invoke({"messages": [("user", f"q{i}")]}, {"configurable": {"thread_id": thread}})
    return graph


def _checkpoints(db: Path, thread: str) -> int:
    """How many checkpoints the file holds for the thread, as a fresh process reads them."""
    return len(list(sqlite_saver(db).list({"configurable": {"thread_id": thread}})))


def test_prune_keeps_the_history_and_the_thread_continues(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    _conversation(db, "t1", 5)
    config = {"configurable": {"thread_id": "t1"}}
    fresh = build_graph(model=ScriptedModel([]), tools=[echo], checkpointer=sqlite_saver(db))
    before = [(m.id, m.content) for m in fresh.get_state(config).values["messages"]]
    removed = sqlite_saver(db, fold=fold_messages).prune_thread("t1", keep=3)
    assert removed > 0 and _checkpoints(db, "t1") == 3
    # A new process (no remembered histories) rebuilds the same messages from the snapshot.
    reopened = build_graph(
        model=ScriptedModel([answer("six")]), tools=[echo], checkpointer=sqlite_saver(db)
    )
    assert [(m.id, m.content) for m in reopened.get_state(config).values["messages"]] == before
    assert len(list(reopened.get_state_history(config))) == 3
    result = reopened.invoke({"messages": [("user", "q5")]}, config)
    assert [m.content for m in result["messages"][-2:]] == ["q5", "six"]


def test_prune_keeps_a_pending_run_resumable(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _conversation(db, "t1", 2)
    config = {"configurable": {"thread_id": "t1"}}
    paused = build_graph(
        model=ScriptedModel([tool_call("echo", text="late")]),
        tools=[echo],
        checkpointer=sqlite_saver(db),
    )
    paused.invoke({"messages": [("user", "q2")]}, config, interrupt_before=["execute_tool"])
    sqlite_saver(db, fold=fold_messages).prune_thread("t1", keep=1)
    resumed = build_graph(
        model=ScriptedModel([answer("done")]), tools=[echo], checkpointer=sqlite_saver(db)
    )
    result = resumed.invoke(None, config)
    assert result["stop_reason"] == "answered"
    assert result["messages"][-2].content == echo.invoke({"text": "late"})
    assert [m.content for m in result["messages"][:2]] == ["q0", result["messages"][1].content]


def test_cli_delete_and_prune(cli: Ferry, tmp_path: Path) -> None:
    def _ferry(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, env=dict(os.environ), cwd=tmp_path)

    db = tmp_path / "ferry.db"  # conftest points FERRY_DB here
    # Long enough that pruning frees whole pages: the rows a few turns leave behind (their
    # messages move into the kept checkpoint) take less than one of the file's 8 KB pages.
    _conversation(db, "keep", 12)
    _conversation(db, "drop", 3)
    deleted = _ferry(tmp_path, "delete", "--thread", "drop", "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout)["deleted"] == ["drop"]
    listed = json.loads(_ferry(tmp_path, "threads", "--json").stdout)
    assert [t["thread_id"] for t in listed["threads"]] == ["keep"]
    pruned = _ferry(tmp_path, "prune", "--keep", "2", "--json")
    report = json.loads(pruned.stdout)
    assert report["checkpoints_removed"] > 0
    assert report["db_bytes_after"] < report["db_bytes_before"]
    history = json.loads(_ferry(tmp_path, "history", "--thread", "keep", "--json").stdout)
    assert [m["content"] for m in history["messages"] if m["role"] == "user"] == [
        f"q{i}" for i in range(12)
    ]
    old = json.loads(_ferry(tmp_path, "prune", "--before", "2999-01-01", "--json").stdout)
    assert old["threads_deleted"] == ["keep"]
    assert old["db_bytes_after"] < old["db_bytes_before"]
    assert _ferry(tmp_path, "delete", "--thread", "nope").returncode == 1
    assert _ferry(tmp_path, "prune").returncode == 2
