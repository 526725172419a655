"""Commands that only read threads create no database: a newcomer's `ferry threads`, `history`
or `memory list` before any question finds nothing, says so, and leaves no file behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_helpers import Ferry, ferry_env, one_json_object


def test_reading_commands_leave_no_database_behind(cli: Ferry, tmp_path: Path) -> None:
    env = {**ferry_env(tmp_path), "FERRY_DB": str(tmp_path / "new" / "ferry.db")}
    listed = cli("threads", "--json", env=env, cwd=tmp_path)
    assert (listed.returncode, one_json_object(listed)) == (0, {"threads": []})
    history = cli("history", "--thread", "t1", env=env, cwd=tmp_path)
    assert history.returncode == 1
    assert history.stderr.splitlines() == ["ferry: unknown thread 't1' (see `ferry threads`)"]
    undo = cli("undo", "--thread", "t1", env=env, cwd=tmp_path)
    assert undo.returncode == 1 and "unknown thread 't1'" in undo.stderr
    memories = cli("memory", "list", "--json", env=env, cwd=tmp_path)
    assert one_json_object(memories)["memories"] == []
    assert not (tmp_path / "new").exists()


def test_a_database_moved_while_a_command_ran_is_said_not_silently_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite writes on to the file it opened; moved away, the turn is not at FERRY_DB."""
    import argparse

    from graph.cli.agent import UserError, open_graph

    db = tmp_path / "data" / "ferry.db"
    monkeypatch.setenv("FERRY_DB", str(db))
    monkeypatch.setenv("FERRY_MODEL", "offline")
    config: Any = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(UserError, match="was moved or removed while this ran"):
        with open_graph(argparse.Namespace(model=None, wait=False), need_model=True) as graph:
            graph.invoke({"messages": [("user", "what is 2+2?")]}, config)
            (tmp_path / "data").rename(tmp_path / "moved")
    with open_graph(argparse.Namespace(model=None, wait=False), need_model=True) as graph:
        graph.invoke({"messages": [("user", "what is 3+3?")]}, config)  # unmoved: no line
