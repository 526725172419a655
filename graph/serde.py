"""How Ferry stores values: message lists in a compact form, everything zstd-compressed.

A thread's history is stored as the messages each step wrote (see `graph.state`), and a process
that has not seen the thread yet — `ferry history`, a restarted server — decodes many of them.
LangGraph's serializer stores each message with all its fields and rebuilds it through pydantic
validation; a message list written here stores only the fields that differ from their defaults
and is rebuilt without re-validating what was validated when it was made. Anything else (and
any message list holding a value msgpack cannot carry exactly) takes LangGraph's path. Values of
32 bytes or more are compressed with Ferry's zstd dictionary (`graph.dictionary`).
"""

from __future__ import annotations

import functools
import threading
import zlib
from collections.abc import Callable
from typing import Any, cast

import ormsgpack
import zstandard
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from graph.dictionary import dictionary

MESSAGES = "ferry-msgs"
"""Type tag of a message list in the compact form (stored on every row: kept short)."""
_DICTIONARY = "+zd1"  # zstd with Ferry's dictionary 1 (graph/dictionary.py)
_ZSTD = "+zstd"  # zstd alone, written by earlier versions; still read
_ZLIB = "+zlib"  # likewise
_WORTH_TRYING = 32  # bytes; with the dictionary even a short reply shrinks by half
_LEVEL = 3  # zstd's default: most of the gain, a few microseconds a value

_CLASSES: dict[str, type[BaseMessage]] = {
    cls.__name__: cls
    for cls in (
        AIMessage, AIMessageChunk, ChatMessage, ChatMessageChunk, FunctionMessage,
        FunctionMessageChunk, HumanMessage, HumanMessageChunk, RemoveMessage, SystemMessage,
        SystemMessageChunk, ToolMessage, ToolMessageChunk,
    )
}  # fmt: skip
# Only values msgpack round-trips exactly: a tuple, datetime, UUID, enum, dataclass, subclass of
# a builtin or huge int makes the encoder raise, and the list takes LangGraph's path instead.
_EXACT_ONLY = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_UUID
)


class FerrySerializer(JsonPlusSerializer):
    """LangGraph's serializer, with compact message lists and zstd-compressed large values.

    Each form has its own type tag (`ferry-messages`, a `+zstd` suffix), so values written by
    LangGraph's serializer, or by earlier Ferry versions (`+zlib`), still load.
    """

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialise `obj`, compressing it when that saves at least a tenth."""
        compact = _encode_messages(obj)
        type_tag, data = (MESSAGES, compact) if compact else super().dumps_typed(obj)
        if len(data) >= _WORTH_TRYING:
            packed = _codecs.compressor.compress(data)
            if len(packed) <= len(data) * 0.9:
                return type_tag + _DICTIONARY, packed
        return type_tag, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Load a value written by `dumps_typed`, LangGraph's serializer or an earlier Ferry."""
        type_tag, payload = data
        if type_tag.endswith(_DICTIONARY):
            type_tag = type_tag.removesuffix(_DICTIONARY)
            payload = _codecs.decompressor.decompress(payload)
        elif type_tag.endswith(_ZSTD):
            type_tag = type_tag.removesuffix(_ZSTD)
            payload = zstandard.ZstdDecompressor().decompress(payload)
        elif type_tag.endswith(_ZLIB):
            type_tag = type_tag.removesuffix(_ZLIB)
            payload = zlib.decompress(payload)
        if type_tag == MESSAGES:
            return [_message(name, fields) for name, fields in ormsgpack.unpackb(payload)]
        return super().loads_typed((type_tag, payload))


def _encode_messages(obj: Any) -> bytes | None:
    """`obj` in the compact form, or None if it is not a list of plain LangChain messages."""
    if type(obj) is not list or not obj:
        return None
    entries = []
    for message in obj:
        name = type(message).__name__
        if _CLASSES.get(name) is not type(message) or message.__pydantic_extra__:
            return None
        fields = {}
        for field, default in _defaults(name)[0].items():
            value = getattr(message, field)
            if type(value) is not type(default) or value != default:
                fields[field] = value
        entries.append([name, fields])
    try:
        return ormsgpack.packb(entries, option=_EXACT_ONLY)
    except TypeError:  # a value msgpack cannot carry exactly
        return None


def _message(name: str, stored: dict[str, Any]) -> BaseMessage:
    """Rebuild a message stored in the compact form, the way pickle rebuilds a pydantic model.

    It was validated when it was made and every field is either stored or its default, so
    validating it again (most of a cold read's cost) would only recompute what is stored.
    """
    cls = _CLASSES[name]
    defaults, fresh = _defaults(name)
    if not stored.keys() <= defaults.keys():  # stored by a version with other fields
        return cls.model_validate(stored)
    values = {**defaults, **stored}  # in field order, as validation would leave them
    for field, empty in fresh:
        if field not in stored:
            values[field] = empty()  # a message's own dict or list, never a shared one
    message = cls.__new__(cls)
    message.__setstate__(
        {
            "__dict__": values,
            "__pydantic_fields_set__": set(defaults),  # all, as LangGraph's own path leaves it
            "__pydantic_extra__": {},
            "__pydantic_private__": None,
        }
    )
    return message


@functools.cache
def _defaults(name: str) -> tuple[dict[str, Any], list[tuple[str, Callable[[], Any]]]]:
    """A message class's fields with their defaults, and those made fresh for each message.

    A field without a default (`content`, `tool_call_id`) maps to PydanticUndefined, which no
    value equals, so it is always stored.
    """
    defaults: dict[str, Any] = {}
    fresh: list[tuple[str, Callable[[], Any]]] = []
    for field, info in _CLASSES[name].model_fields.items():
        if info.default_factory is not None:
            factory = cast(Callable[[], Any], info.default_factory)
            defaults[field] = factory()
            fresh.append((field, factory))
        else:
            defaults[field] = info.default
    return defaults, fresh


class _Codecs(threading.local):
    """zstd contexts are not thread-safe, and making one per value costs more than the work."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=_LEVEL, dict_data=dictionary())
        self.decompressor = zstandard.ZstdDecompressor(dict_data=dictionary())


_codecs = _Codecs()
