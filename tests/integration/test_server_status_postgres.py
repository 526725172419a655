"""Postgres: a thread's version, which tells the server's registry sync what to look at again.

The same contract as SQLite's (tests/unit/test_server_status.py), on LangGraph's tables in a
real local Postgres: a pause written at a checkpoint after it moves the version.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from graph.server.versions import postgres_versions
from graph.storage.postgres.saver import open_postgres_saver
from tests.support.pgserver import PostgresServer

pytestmark = pytest.mark.timeout(180)


def test_a_pause_written_after_its_checkpoint_moves_the_version(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")
    assert postgres_versions(url) == {}  # no tables yet
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    with open_postgres_saver(url) as saver:
        assert postgres_versions(url) == {}
        stored = saver.put(config, empty_checkpoint(), {"source": "loop", "step": 1}, {})
        before = postgres_versions(url)
        assert list(before) == ["t1"]
        saver.put_writes(stored, [("__interrupt__", ["paused"])], "task-1")
        after = postgres_versions(url)
        assert after["t1"] != before["t1"]
        later = saver.put(stored, empty_checkpoint(), {"source": "loop", "step": 2}, {})
        assert postgres_versions(url)["t1"].startswith(later["configurable"]["checkpoint_id"])
