"""What a stored value may name: the types Ferry stores, and nothing else.

LangGraph's msgpack values can name any module and callable, and its serializer, by default,
imports and calls them when a thread is read. Anyone who can write the database (a shared
folder, a restored backup, another Postgres user) would then run code in every process that
reads it. Here a stored name is only ever looked up in a table of classes imported by Ferry
itself (`graph.storage.codec.stored_types.ALLOWED`, plus a caller's `allowed_types`): nothing is
imported by name, and a name outside the table is refused. The same rule is applied when a
value is written (`Unpacker.check`), so a value that would be refused is never stored.
"""

from __future__ import annotations

import datetime
import functools
import json
import re
import threading
from collections.abc import Callable
from typing import Any

import ormsgpack
import pydantic
from langgraph.types import Send

from graph.storage.codec.reads import StoredValueError
from graph.storage.codec.stored_types import MESSAGE_CLASSES
from graph.storage.internals import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
    DeltaSnapshot,
)


class UnstorableValueError(StoredValueError):
    """A value Ferry refuses to store, because it names a type Ferry would refuse to load."""


class _RefusedType(StoredValueError):
    """A stored value names a type outside the allowlist (`type_name`: module.name)."""

    def __init__(self, type_name: str) -> None:
        super().__init__(
            f"refused to load a stored value naming {type_name}: "
            "not a type Ferry stores (was the database written by someone else?)"
        )
        self.type_name = type_name


# The type bytes of msgpack's extensions (fixext 1-16, ext 8/16/32): a value without any of
# these bytes names no type, and needs no look at its names.
_EXTENSION_HEAD = re.compile(rb"[\xc7-\xc9\xd4-\xd8]")


class Unpacker:
    """Unpacks msgpack, rebuilding only `allowed` types and refusing any other stored name."""

    def __init__(self, allowed: dict[tuple[str, str], type]) -> None:
        self.allowed = allowed
        # ormsgpack replaces an ext hook's exception with a bare "ext_hook failed": the refusal
        # is kept here (per thread: one serializer serves every thread) and raised instead.
        self._refusal = threading.local()

    def unpack(self, data: bytes, option: int | None = None) -> Any:
        """`ormsgpack.unpackb` with the strict ext hook; a refusal is a `StoredValueError`."""
        return self._unpacked(data, self._hook, option)

    def check(self, data: bytes) -> None:
        """Refuse to store `data` (LangGraph's msgpack) if `unpack` would refuse a type it names.

        Only the names are looked up, nothing is rebuilt; most values (plain dicts, lists and
        text) are passed at a glance.
        """
        if _EXTENSION_HEAD.search(data) is None:
            return
        try:
            self._unpacked(data, self._names, ormsgpack.OPT_NON_STR_KEYS)
        except _RefusedType as exc:
            raise UnstorableValueError(
                f"refused to store a value of type {exc.type_name}: Ferry would refuse to "
                "load it on every later read; to store it, pass its class in "
                "FerrySerializer(allowed_types=[...]) (docs/threads.md: Stored data)"
            ) from None

    def _unpacked(self, data: bytes, hook: Callable[[int, bytes], Any], option: int | None) -> Any:
        self._refusal.error = None
        try:
            return ormsgpack.unpackb(data, ext_hook=hook, option=option)
        except ValueError as exc:
            error = self._refusal.error or StoredValueError(f"a stored value is corrupt: {exc}")
            raise error from None

    def _hook(self, code: int, data: bytes) -> Any:
        try:
            return self._rebuild(code, data)
        except StoredValueError as exc:
            self._refusal.error = self._refusal.error or exc
            raise

    def _names(self, code: int, data: bytes) -> None:
        """Check the names an extension holds, its own and those nested in it."""
        try:
            entry = ormsgpack.unpackb(data, ext_hook=self._names, option=ormsgpack.OPT_NON_STR_KEYS)
            if code != EXT_DELTA_SNAPSHOT:
                self._named(code, entry)
        except StoredValueError as exc:
            self._refusal.error = self._refusal.error or exc
            raise

    def _rebuild(self, code: int, data: bytes) -> Any:
        unpack = functools.partial(
            ormsgpack.unpackb, ext_hook=self._hook, option=ormsgpack.OPT_NON_STR_KEYS
        )
        if code == EXT_DELTA_SNAPSHOT:
            return DeltaSnapshot(unpack(data))
        payload, cls = self._named(code, unpack(data))
        if cls is None:
            return datetime.datetime.fromisoformat(payload)
        try:
            return _BUILDERS[code](cls, payload)
        except (TypeError, ValueError, pydantic.ValidationError):
            return payload  # an allowed type whose fields changed: keep the data, as LangGraph does

    def _named(self, code: int, entry: Any) -> tuple[Any, type | None]:
        """An extension's payload and the allowed class it names (None: a stored datetime)."""
        if not isinstance(entry, list | tuple) or len(entry) < 3:
            raise StoredValueError(f"a stored value has a malformed extension (type {code})")
        module, name, payload = entry[0], entry[1], entry[2]
        if code == EXT_METHOD_SINGLE_ARG:
            # LangGraph stores a datetime as its ISO text and the method that parses it.
            if (module, name, list(entry[3:4])) == ("datetime", "datetime", ["fromisoformat"]):
                return payload, None
            raise _refused(module, f"{name}.{entry[3:4]}")
        cls = self.allowed.get((module, name)) if isinstance(module, str) else None
        if cls is None or code not in _BUILDERS:
            raise _refused(module, name)
        return payload, cls


def _positional(cls: type, args: Any) -> Any:
    if cls is Send:  # LangGraph stores a Send's timeout as its third argument
        return Send(args[0], args[1]) if len(args) == 2 else Send(args[0], args[1], timeout=args[2])
    return cls(*args)


def _pydantic(cls: type, fields: Any) -> Any:
    try:
        return cls(**fields)
    except pydantic.ValidationError:
        return cls.model_construct(**fields)  # type: ignore[attr-defined]  # only pydantic models reach here


_BUILDERS: dict[int, Callable[[type, Any], Any]] = {
    EXT_CONSTRUCTOR_SINGLE_ARG: lambda cls, arg: cls(arg),
    EXT_CONSTRUCTOR_POS_ARGS: _positional,
    EXT_CONSTRUCTOR_KW_ARGS: lambda cls, kwargs: cls(**kwargs),
    EXT_PYDANTIC_V2: _pydantic,
}


def _refused(module: Any, name: Any) -> StoredValueError:
    return _RefusedType(f"{str(module)[:80]}.{str(name)[:80]}")


def load_json(data: bytes, allowed: dict[tuple[str, str], type]) -> Any:
    """A value in LangChain's JSON form (written by old LangGraph versions): messages only."""

    def revive(value: dict[str, Any]) -> Any:
        if value.get("type") != "constructor" or "id" not in value:
            return value
        path = value["id"]
        name = path[-1] if isinstance(path, list) and path else None
        cls = next((c for c in MESSAGE_CLASSES if c.__name__ == name), None)
        known = path[:1] in (["langchain"], ["langchain_core"]) and path[-2:-1] == ["messages"]
        if cls is None or not known or cls not in allowed.values():
            raise _refused(".".join(map(str, path[:-1])), name)
        return cls(**value.get("kwargs", {}))

    return json.loads(data, object_hook=revive)
