"""Ferry's compact form of a message list (`ferry-msgs`): only the fields that differ from defaults.

A message list is stored as msgpack of `[class_name, fields]` pairs and rebuilt without
re-validating what pydantic validated when the message was made (graph/storage/FORMAT.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import ormsgpack
from langchain_core.messages import BaseMessage

from graph.storage.codec.reads import StoredValueError
from graph.storage.codec.stored_types import MESSAGE_CLASSES

_CLASSES: dict[str, type[BaseMessage]] = {cls.__name__: cls for cls in MESSAGE_CLASSES}
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


def encoded(obj: Any) -> bytes | None:
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


def rebuilt(name: str, stored: dict[str, Any]) -> BaseMessage:
    """Rebuild a message stored in the compact form, the way pickle rebuilds a pydantic model.

    It was validated when it was made and every field is either stored or its default, so
    validating it again (most of a cold read's cost) would only recompute what is stored.
    """
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise StoredValueError(f"refused to load a stored message of class {str(name)[:80]!r}")
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
