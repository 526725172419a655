"""The estimate a read is charged is an upper bound on what a value takes once loaded.

Each shape is one an attacker would choose (many small objects from few bytes) or one that
honest values are made of; each is loaded for real and measured (tracemalloc, peak).
"""

from __future__ import annotations

import gc
import struct
import tracemalloc
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.storage.codec.reads import PER_MESSAGE, msgpack_footprint
from graph.storage.codec.serde import MESSAGES, FerrySerializer, compact_form
from graph.storage.internals import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_PYDANTIC_V2,
)

N = 5_000
CALL = 4096


def _array(item: bytes, count: int = N) -> bytes:
    return b"\xdd" + struct.pack(">I", count) + item * count


def _ext(code: int, *entry: Any) -> bytes:
    data = ormsgpack.packb(list(entry))
    return b"\xc7" + bytes([len(data), code]) + data


SHAPES: dict[str, tuple[str, bytes]] = {
    "empty lists": ("msgpack", _array(b"\x90")),
    "empty dicts": ("msgpack", _array(b"\x80")),
    "lists of one": ("msgpack", _array(b"\x91\x90")),
    "dicts of small ints": ("msgpack", _array(b"\x8f" + bytes(range(30)))),
    "dicts of one list": ("msgpack", _array(b"\x81\x01\x90")),
    "one-character strings": ("msgpack", _array(b"\xa1x")),
    "negative ints": ("msgpack", _array(b"\xe0")),
    "floats": ("msgpack", _array(b"\xca\x3f\x80\x00\x01")),
    "small ints": ("msgpack", _array(b"\x01")),
    "ASCII with one astral character": (
        "msgpack",
        ormsgpack.packb(["x" * 200_000 + "\U0001f600"]),
    ),
    "sets": ("msgpack", _array(_ext(EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "set", []))),
    "timedeltas": ("msgpack", _array(_ext(EXT_CONSTRUCTOR_KW_ARGS, "datetime", "timedelta", {}))),
    "deques": ("msgpack", _array(_ext(EXT_CONSTRUCTOR_SINGLE_ARG, "collections", "deque", []))),
    "messages as extensions": (
        "msgpack",
        _array(_ext(EXT_PYDANTIC_V2, "langchain_core.messages.ai", "AIMessage", {"content": ""})),
    ),
    "empty AI messages": (MESSAGES, ormsgpack.packb([["AIMessage", {"content": ""}]] * N)),
    "empty human messages": (MESSAGES, ormsgpack.packb([["HumanMessage", {"content": ""}]] * N)),
    "tool messages": (
        MESSAGES,
        ormsgpack.packb([["ToolMessage", {"content": "", "tool_call_id": ""}]] * N),
    ),
    "a conversation": (
        MESSAGES,
        compact_form(
            [
                message
                for n in range(500)
                for message in (
                    HumanMessage(f"weather in city {n}? 天气怎么样", id=f"h{n}"),
                    AIMessage(
                        "",
                        id=f"a{n}",
                        tool_calls=[{"name": "w", "args": {"c": n}, "id": f"c{n}"}],
                        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
                    ),
                    ToolMessage("sunny, 23 °C", tool_call_id=f"c{n}", id=f"t{n}"),
                )
            ]
        )
        or b"",
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_value_is_never_charged_less_than_it_takes(shape: str) -> None:
    type_tag, payload = SHAPES[shape]
    serde = FerrySerializer(max_value_bytes=2**30)  # nothing refused: measure it all
    # No collection during the load: it could only free memory and lower the peak. (A full
    # collection first would cost more than the load in a long-running worker.)
    gc.disable()
    tracemalloc.start()
    try:
        loaded = serde.loads_typed((type_tag, payload))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gc.enable()
    charged = msgpack_footprint(payload, 2**40)
    if type_tag == MESSAGES:
        charged += PER_MESSAGE * len(loaded)
    # A call's own transient allocations (a few hundred bytes, freed on return) are not the value's.
    assert charged + CALL >= peak, f"charged {charged} bytes for a value that took {peak}"
