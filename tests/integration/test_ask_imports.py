"""`ferry ask` imports what the turn runs, nothing more (issue 30: a first answer without waiting).

Read from `-X importtime` in a new process, so it holds on any machine, however loaded: which
modules a command loads does not depend on how fast they load.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.cli_helpers import ferry_env, run_command

# Loaded only for what an offline turn without memories, search or Temporal never does.
UNUSED = {
    "temporalio": "Temporal, only with FERRY_TEMPORAL_ADDRESS or --temporal",
    "graph.temporal": "Ferry's workflow and worker, only with Temporal",
    "langgraph.store.sqlite": "the memory store, opened when a turn first uses it",
    "sqlite_vec": "loaded by LangGraph's SQLite store",
    "numpy": "loaded by sqlite-vec",
    "aiosqlite": "loaded by LangGraph's SQLite store",
    "tavily": "web_search's client, imported when it searches",
    "tiktoken": "loaded by tavily-python",
    "openai": "a provider's SDK, for a provider's model only",
    "langchain_openai": "a provider's model only",
    "psycopg": "Postgres, only with FERRY_DATABASE_URL",
    "mcp": "MCP servers, only when some are configured",
}


def _imported(tmp_path: Path, question: str) -> list[str]:
    """The modules `ferry ask QUESTION` (offline, a new process) imports, in order."""
    argv = [sys.executable, "-X", "importtime", "-m", "graph.cli", "ask", question]
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    done = run_command(argv, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()  # the answer
    return [
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]


def _loaded(imported: list[str], package: str) -> bool:
    return any(m == package or m.startswith(package + ".") for m in imported)


def test_a_one_tool_turn_imports_no_store_search_client_provider_or_temporal(
    tmp_path: Path,
) -> None:
    imported = _imported(tmp_path, "what is 2+3")
    assert "graph.builder" in imported and "tools.calculator" in imported
    assert {p: why for p, why in UNUSED.items() if _loaded(imported, p)} == {}


def test_a_question_with_words_opens_the_memory_store_it_looks_memories_up_in(
    tmp_path: Path,
) -> None:
    # "time", "Asia" and "Tokyo" could each be in a memory: the store is opened to look.
    imported = _imported(tmp_path, "what time is it in Asia/Tokyo")
    assert _loaded(imported, "langgraph.store.sqlite")
    assert not _loaded(imported, "temporalio") and not _loaded(imported, "tavily")
