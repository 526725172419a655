"""`ferry threads` loads neither LangGraph nor the tools when every thread has its summary row.

What a user would notice if it went wrong: a slow listing (the imports are most of its time),
a listing that differs from the saver's, or `from tools import calculator` handing back the
module instead of the tool, depending on what was imported first.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from graph import build_graph
from graph.cli import main
from graph.storage import sqlite_saver
from graph.storage.threads.reading import list_threads
from tests.support.cli_helpers import ferry_env, run_command
from tests.support.scripted import ScriptedModel, answer

HEAVY = ("langgraph", "langchain_core", "langchain_openai", "openai", "httpx", "psycopg")
"""Packages whose import is most of a slow listing's time."""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ferry.db"
    model = ScriptedModel([answer("first"), answer("second"), answer("third")])
    graph = build_graph(model=model, tools=[], checkpointer=sqlite_saver(path))
    for thread, question in [("older", "q1"), ("older", "q2"), ("newer", "q3")]:
        graph.invoke({"messages": [("user", question)]}, {"configurable": {"thread_id": thread}})
    return path


def _listed(db: Path, tmp_path: Path) -> tuple[list[dict[str, object]], list[str]]:
    """`ferry threads --json` in a new process: the threads, and every module it imported."""
    argv = [sys.executable, "-X", "importtime", "-m", "graph.cli", "threads", "--json"]
    done = run_command(argv, env=ferry_env(tmp_path, FERRY_DB=str(db)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    return json.loads(done.stdout)["threads"], imported


def test_listing_threads_with_rows_imports_no_langgraph_langchain_or_tool(
    db: Path, tmp_path: Path
) -> None:
    threads, imported = _listed(db, tmp_path)
    assert threads == list_threads(sqlite_saver(db))
    assert [t["thread_id"] for t in threads] == ["newer", "older"]
    assert "graph.storage.threads.reading" in imported
    assert [m for m in imported if m.split(".")[0] in HEAVY] == []
    # tools.trust: the rule for a folder's .env, which every command reads its settings through.
    assert [m for m in imported if m.startswith("tools.")] == ["tools.trust", "tools.settings"]
    assert "graph.storage.sqlite.saver" not in imported


def test_a_thread_without_a_row_is_listed_by_the_saver_and_its_row_written_back(
    db: Path, tmp_path: Path
) -> None:
    expected = list_threads(sqlite_saver(db))
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DELETE FROM ferry_thread_summaries WHERE thread_id = 'older'")

    threads, imported = _listed(db, tmp_path)
    assert threads == expected
    assert "graph.storage.sqlite.saver" in imported  # the slow way, once
    threads, imported = _listed(db, tmp_path)
    assert threads == expected
    assert "graph.storage.sqlite.saver" not in imported


def test_the_text_listing_names_the_database_and_a_read_only_file_lists_the_same(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRY_DB", str(db))
    db.chmod(0o444)
    try:
        assert main(["threads"]) == 0
    finally:
        db.chmod(0o644)
    shown = capsys.readouterr()
    assert shown.err == f"database: {db.absolute()}\n"
    assert [line.split()[0] for line in shown.out.splitlines()] == ["newer", "older"]
    assert "2 messages  q3" in shown.out and "4 messages  q1" in shown.out


IMPORTED_FIRST = [
    "import tools",
    "import tools.calculator, tools.web_search",
    "from tools.calculator import calculator",
    "from tools.web_search import web_search",
    "from tools import files, clock",
    "import tools.mcp",
]


PROBE = """
import json, sys, traceback

for first in json.loads(sys.argv[1]):
    # As in a new interpreter: none of Ferry's tools package imported yet.
    for name in [n for n in sys.modules if n == "tools" or n.startswith("tools.")]:
        del sys.modules[name]
    try:
        exec(first)
        from langchain_core.tools import BaseTool
        import tools
        from tools import TOOLS, calculator, get_datetime, get_weather, read_file, web_search
        named = [calculator, get_datetime, get_weather, read_file, web_search]
        assert all(isinstance(t, BaseTool) for t in [*named, *TOOLS]), named
        assert tools.calculator is calculator and tools.web_search is web_search
        from tools import files
        assert files.__name__ == "tools.files"
        print(json.dumps({"first": first, "registry": [t.name for t in TOOLS]}))
    except Exception:
        print(json.dumps({"first": first, "error": traceback.format_exc()}))
"""


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What the probe found after each import in IMPORTED_FIRST, by that import.

    One interpreter tries them all, dropping the `tools` modules before each: the state a new
    interpreter starts in, for that package (the libraries it imports stay, as they would).
    """
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(IMPORTED_FIRST)],
        cwd=tmp_path_factory.mktemp("probe"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = [json.loads(line) for line in done.stdout.splitlines()]
    return {entry["first"]: entry for entry in found}


@pytest.mark.parametrize("first", IMPORTED_FIRST)
def test_the_registry_names_are_the_tools_whatever_is_imported_first(
    first: str, registries: dict[str, dict[str, Any]]
) -> None:
    found = registries[first]
    assert "error" not in found, found.get("error")
    assert found["registry"] == [
        "web_search",
        "get_weather",
        "calculator",
        "read_file",
        "get_datetime",
    ]


def test_a_database_not_made_yet_lists_nothing_and_is_not_made(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet.db"

    threads, imported = _listed(missing, tmp_path)

    assert threads == []
    assert not missing.exists()
    assert [m for m in imported if m.split(".")[0] in HEAVY] == []
