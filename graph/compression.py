"""Checkpoint serialisation that compresses large values (tool results, long histories)."""

from __future__ import annotations

import zlib
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

_SUFFIX = "+zlib"
_WORTH_TRYING = 256  # bytes; smaller values rarely shrink enough to pay for the lookup


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, with values of a few hundred bytes or more zlib-compressed.

    Compressed values carry a `+zlib` suffix on their type tag, so values written before (or by
    a saver without this serializer) still load.
    """

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialise `obj`, compressing it when that saves at least a tenth."""
        type_tag, data = super().dumps_typed(obj)
        if len(data) >= _WORTH_TRYING:
            packed = zlib.compress(data, 1)  # fastest level: most of the gain, little CPU
            if len(packed) <= len(data) * 0.9:
                return type_tag + _SUFFIX, packed
        return type_tag, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Load a value written by `dumps_typed` (compressed or not)."""
        type_tag, payload = data
        if type_tag.endswith(_SUFFIX):
            return super().loads_typed((type_tag.removesuffix(_SUFFIX), zlib.decompress(payload)))
        return super().loads_typed(data)
