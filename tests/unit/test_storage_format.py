"""Every stored form Ferry has ever written loads to known values (graph/storage/FORMAT.md).

The bytes in tests/support/golden/values.json were written once and are never regenerated: a
change that stops one of them loading breaks files users already have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from graph.storage.codec.serde import FerrySerializer

GOLDEN = json.loads((Path(__file__).parents[1] / "support" / "golden" / "values.json").read_text())
KEY = b"0123456789abcdef"
MESSAGES = [
    HumanMessage("what is 2+2?", id="h1"),
    AIMessage(
        "", id="a1", tool_calls=[{"id": "c1", "name": "calculator", "args": {"expression": "2+2"}}]
    ),
    ToolMessage("4", tool_call_id="c1", id="t1"),
    AIMessage("2+2 is 4. " * 4, id="a2"),
]
EXPECTED: dict[str, Any] = {
    "ferry-msgs": MESSAGES,
    "ferry-msgs+zd1": MESSAGES,
    "ferry-msgs+zd1+aes": MESSAGES,
    "msgpack": {"step": 3, "messages": MESSAGES},
    "msgpack+zlib": {"step": 3, "messages": MESSAGES},
    "msgpack+zstd": {"step": 3, "messages": MESSAGES},
    "json": [HumanMessage("hello", id="h0")],
}


def test_every_form_ever_written_has_a_golden_value() -> None:
    assert set(GOLDEN) == set(EXPECTED)


@pytest.mark.parametrize("type_tag", sorted(EXPECTED))
def test_a_stored_form_loads_to_its_known_value(type_tag: str) -> None:
    cipher = EncryptedSerializer.from_pycryptodome_aes(key=KEY).cipher
    loaded = FerrySerializer(cipher=cipher).loads_typed((type_tag, bytes.fromhex(GOLDEN[type_tag])))
    assert loaded == EXPECTED[type_tag]


def test_what_ferry_writes_today_is_one_of_the_golden_forms() -> None:
    assert FerrySerializer().dumps_typed(MESSAGES)[0] == "ferry-msgs+zd1"
    assert FerrySerializer().dumps_typed({"step": 3})[0] == "msgpack"
