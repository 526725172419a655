"""What is stored reads back on Postgres: every allowed type, a refusal at write, the metadata."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from graph.storage.codec.serde import UnstorableValueError
from graph.storage.postgres.saver import open_postgres_saver
from tests.support.pgserver import PostgresServer
from tests.support.stored_types import EXAMPLES, same

pytestmark = pytest.mark.timeout(180)
CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
LANGGRAPH = JsonPlusSerializer(allowed_msgpack_modules=list(EXAMPLES))


class Receipt(BaseModel):
    amount: int


@pytest.fixture(scope="module")
def saver(postgres_server: PostgresServer) -> Iterator[Any]:
    url = postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")
    with open_postgres_saver(url) as opened:
        yield opened


def _thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}


def test_each_allowed_type_comes_back(saver: Any) -> None:
    config = _thread()
    checkpoint = empty_checkpoint()
    versions = {f"v{i}": saver.get_next_version(None, None) for i in range(len(EXAMPLES))}
    checkpoint["channel_values"] = {f"v{i}": value for i, value in enumerate(EXAMPLES.values())}
    checkpoint["channel_versions"] = versions
    saver.put(config, checkpoint, {"source": "loop", "step": 1}, versions)
    found = saver.get_tuple(config)
    assert found is not None
    for i, value in enumerate(EXAMPLES.values()):
        expected = LANGGRAPH.loads_typed(LANGGRAPH.dumps_typed(value))
        assert same(found.checkpoint["channel_values"][f"v{i}"], expected), type(value)


def test_a_foreign_type_is_refused_at_put_and_the_thread_keeps_its_last_checkpoint(
    saver: Any,
) -> None:
    config = _thread()
    first = empty_checkpoint()
    saved = saver.put(config, first, {"source": "loop", "step": 1}, {})
    refused = empty_checkpoint()
    refused["channel_values"] = {"value": [Receipt(amount=3)]}
    with pytest.raises(UnstorableValueError, match=r"Receipt: .*allowed_types"):
        saver.put(saved, refused, {"source": "loop", "step": 2}, {"value": 1})
    with pytest.raises(UnstorableValueError, match=r"Receipt: .*allowed_types"):
        saver.put_writes(saved, [("value", Receipt(amount=3))], task_id="task1")
    found = saver.get_tuple({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
    assert found is not None and found.checkpoint["id"] == first["id"]
    assert found.pending_writes == []


def test_get_tuple_returns_the_metadata_put(saver: Any) -> None:
    config = _thread()
    metadata = {
        "source": "loop",
        "step": 3,
        "parents": {},
        "counters_since_delta_snapshot": {"messages": [7, 4999], "notes": [1, 4999]},
    }
    saver.put(config, empty_checkpoint(), metadata, {})
    found = saver.get_tuple(config)
    assert found is not None and found.metadata == metadata
