"""What a stored value may name: the few types Ferry stores, and nothing else.

LangGraph's msgpack values can name any module and callable, and its serializer, by default,
imports and calls them when a thread is read. Anyone who can write the database (a shared
folder, a restored backup, another Postgres user) would then run code in every process that
reads it. Here a stored name is only ever looked up in `ALLOWED`, a table of classes imported
by Ferry itself: nothing is imported by name, and a name outside the table is refused.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import functools
import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import ormsgpack
import pydantic
from langchain_core import messages as lc
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy

from graph.storage.codec.reads import one_read
from graph.storage.internals import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V2,
    DeltaChannelHistory,
    DeltaSnapshot,
)


class StoredValueError(ValueError):
    """A stored value Ferry refuses to load: it names a type Ferry does not store, or is too big.

    The message is one line meant for the user; the savers prefix it with the thread's id.
    """


MESSAGE_CLASSES: tuple[type[lc.BaseMessage], ...] = (
    lc.AIMessage, lc.AIMessageChunk, lc.ChatMessage, lc.ChatMessageChunk, lc.FunctionMessage,
    lc.FunctionMessageChunk, lc.HumanMessage, lc.HumanMessageChunk, lc.RemoveMessage,
    lc.SystemMessage, lc.SystemMessageChunk, lc.ToolMessage, lc.ToolMessageChunk,
)  # fmt: skip
_VALUE_TYPES: tuple[type, ...] = (
    # LangGraph's own bookkeeping: tasks, interrupts, resumes, edits made in Studio.
    Send, Interrupt, Command, Overwrite, TimeoutPolicy,
    # Plain values that a message's metadata or a tool's artifact may hold.
    datetime.date, datetime.time, datetime.timedelta, datetime.timezone, uuid.UUID,
    decimal.Decimal, set, frozenset, collections.deque,
)  # fmt: skip
ALLOWED: dict[tuple[str, str], type] = {
    (cls.__module__, cls.__name__): cls for cls in (*MESSAGE_CLASSES, *_VALUE_TYPES)
}
"""(module, name) → class, for every type a stored value may name."""


def allowing(extra: Iterable[type]) -> dict[tuple[str, str], type]:
    """`ALLOWED` plus the classes a caller stores itself (e.g. a tool's pydantic artifact)."""
    return {**ALLOWED, **{(cls.__module__, cls.__name__): cls for cls in extra}}


class Unpacker:
    """Unpacks msgpack, rebuilding only `allowed` types and refusing any other stored name."""

    def __init__(self, allowed: dict[tuple[str, str], type]) -> None:
        self.allowed = allowed
        # ormsgpack replaces an ext hook's exception with a bare "ext_hook failed": the refusal
        # is kept here (per thread: one serializer serves every thread) and raised instead.
        self._refusal = threading.local()

    def unpack(self, data: bytes, option: int | None = None) -> Any:
        """`ormsgpack.unpackb` with the strict ext hook; a refusal is a `StoredValueError`."""
        self._refusal.error = None
        try:
            return ormsgpack.unpackb(data, ext_hook=self._hook, option=option)
        except ValueError as exc:
            error = self._refusal.error or StoredValueError(f"a stored value is corrupt: {exc}")
            raise error from None

    def _hook(self, code: int, data: bytes) -> Any:
        try:
            return self._rebuild(code, data)
        except StoredValueError as exc:
            self._refusal.error = self._refusal.error or exc
            raise

    def _rebuild(self, code: int, data: bytes) -> Any:
        unpack = functools.partial(
            ormsgpack.unpackb, ext_hook=self._hook, option=ormsgpack.OPT_NON_STR_KEYS
        )
        if code == EXT_DELTA_SNAPSHOT:
            return DeltaSnapshot(unpack(data))
        entry = unpack(data)
        if not isinstance(entry, list | tuple) or len(entry) < 3:
            raise StoredValueError(f"a stored value has a malformed extension (type {code})")
        module, name, payload = entry[0], entry[1], entry[2]
        if code == EXT_METHOD_SINGLE_ARG:
            # LangGraph stores a datetime as its ISO text and the method that parses it.
            if (module, name, entry[3:4]) == ("datetime", "datetime", ["fromisoformat"]):
                return datetime.datetime.fromisoformat(payload)
            raise _refused(module, f"{name}.{entry[3:4]}")
        cls = self.allowed.get((module, name)) if isinstance(module, str) else None
        if cls is None or code not in _BUILDERS:
            raise _refused(module, name)
        try:
            return _BUILDERS[code](cls, payload)
        except (TypeError, ValueError, pydantic.ValidationError):
            return payload  # an allowed type whose fields changed: keep the data, as LangGraph does


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
    return StoredValueError(
        f"refused to load a stored value naming {str(module)[:80]}.{str(name)[:80]}: "
        "not a type Ferry stores (was the database written by someone else?)"
    )


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


@contextmanager
def naming_thread(config: RunnableConfig | None) -> Iterator[None]:
    """Prefix a refusal with the thread it was read for; count what it loads as one read."""
    try:
        with one_read():
            yield
    except StoredValueError as exc:
        thread = (config or {}).get("configurable", {}).get("thread_id")
        if thread is None or str(exc).startswith("thread "):
            raise
        raise StoredValueError(f"thread {thread}: {exc}") from None


class NamesThreadOnRefusal(BaseCheckpointSaver[Any]):
    """Mixed into each saver, so that a refused value names its thread wherever it is read."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (see the saver this is mixed into)."""
        with naming_thread(config):
            return super().get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (see the saver this is mixed into)."""
        with naming_thread(config):
            return await super().aget_tuple(config)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """A channel's history up to `config`'s checkpoint (see the saver this is mixed into)."""
        with naming_thread(config):
            return super().get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """A channel's history up to `config`'s checkpoint (see the saver this is mixed into)."""
        with naming_thread(config):
            return await super().aget_delta_channel_history(config=config, channels=channels)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The matching checkpoints, newest first (see the saver this is mixed into)."""
        found = super().list(config, filter=filter, before=before, limit=limit)
        while True:
            with naming_thread(config):
                saved = next(found, None)
            if saved is None:
                return
            yield saved

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The matching checkpoints, newest first (see the saver this is mixed into)."""
        found = super().alist(config, filter=filter, before=before, limit=limit)
        while True:
            with naming_thread(config):
                saved = await anext(found, None)
            if saved is None:
                return
            yield saved
