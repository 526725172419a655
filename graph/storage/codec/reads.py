"""One read of stored values: what it may take in memory, and how a refusal names its thread.

A read (a checkpoint from `get_tuple`, each one `list` yields, a thread's history) loads many
stored values, each within the per-value cap. The serializer (`graph.storage.codec.serde`) notes
each value's stored size and charges what it may take once loaded (its footprint, estimated
below) before unpacking it; the read is refused once it has taken more than a floor plus
`RATIO` times what it found stored. So a long honest thread is never refused for its length,
and a bomb (a few stored bytes that unpack into gigabytes) gets the floor.

The ledger is a context variable, so every thread and task has its own: a refused read costs
only itself, and a read made inside another (a history rebuild reads its checkpoint) is part
of it. A refusal is a `StoredValueError`, which the savers prefix with the thread's id
(`naming_thread`).

A value's bytes are not its cost: msgpack spends one byte on an empty list or dict, which
Python spends 64 or 72 on (a few hundred bytes of zstd hold ten million of them), and a
rebuilt message takes about 1.5 KB whatever its stored size. Both estimates here are upper
bounds, checked against the costliest shapes (`tests/unit/test_footprint.py`). A small
value is estimated at a glance: `_PER_BYTE` a byte (a pointer per element, a dict's entry,
text in 4-byte characters) and `_PER_OBJECT` per byte from 0x80 up (every msgpack type that
allocates is written with one; the positive fixints below are Python's shared small ints).
A larger one, or one whose bytes are mostly from 0x80 up (text in other scripts, binary
values, or a bomb), has its headers walked and each object costed by its type and size.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from graph.storage.internals import DeltaChannelHistory


class StoredValueError(ValueError):
    """A stored value Ferry refuses to load: it names a type Ferry does not store, or is too big.

    The message is one line meant for the user; the savers prefix it with the thread's id.
    """


# -- the ledger --------------------------------------------------------------------------------
RATIO = 512
"""Bytes a read may take in memory per byte it found stored. Honest reads are estimated at
20 to 210: text takes about its size, but a message compresses (with Ferry's dictionary) to
a couple of dozen bytes and is rebuilt into 1.5 KB."""


class _Ledger:
    """What one read found stored, and what the values it loaded may take."""

    def __init__(self) -> None:
        self.stored = 0
        self.spent = 0


_open: contextvars.ContextVar[_Ledger | None] = contextvars.ContextVar("ferry_read", default=None)


@contextlib.contextmanager
def one_read() -> Iterator[None]:
    """Count the values loaded inside as one read (inside a read already open: as part of it).

    Keep a `yield` out of it: a generator's caller would share the ledger meanwhile.
    """
    if _open.get() is not None:
        yield
        return
    token = _open.set(_Ledger())
    try:
        yield
    finally:
        _open.reset(token)


def found(stored: int) -> None:
    """Note that the read in progress found `stored` bytes in storage."""
    if (ledger := _open.get()) is not None:
        ledger.stored += stored


def left(floor: int) -> int:
    """What the read in progress may still take: `floor`, plus its share of what it found."""
    ledger = _open.get()
    if ledger is None:
        return floor
    return floor + RATIO * ledger.stored - ledger.spent


def spend(cost: int, floor: int) -> int | None:
    """Charge `cost` bytes to the read in progress; past its budget, the budget (else None)."""
    ledger = _open.get()
    if ledger is None:
        return None if cost <= floor else floor
    ledger.spent += cost
    budget = floor + RATIO * ledger.stored
    return None if ledger.spent <= budget else budget


# -- footprints --------------------------------------------------------------------------------

PER_MESSAGE = 1536
"""A message rebuilt from Ferry's compact form, with its own empty dicts and lists."""
PER_JSON_BYTE = 48  # LangChain's JSON (old values): `[]` is 2 bytes, 72 once loaded
_PER_BYTE, _PER_OBJECT = 24, 160
_AT_A_GLANCE = 2**20  # estimates up to this are taken as they are, without a walk
_ASCII = bytes(range(0x80))
_LIST, _ITEM, _DICT, _ENTRY = 72, 8, 240, 56  # sys.getsizeof with the collector's header
_TEXT, _NUMBER, _EXTENSION = 80, 36, 2048  # an extension rebuilds an object (a message, say)
_WIDEST = 4  # bytes a character takes in a str holding one beyond U+FFFF, even an ASCII one

# What follows each type byte from 0xC0, as (kind, width). _FIXED: `width` bytes. _TEXT_OF,
# _BYTES_OF: a length of `width` bytes, then that many bytes. _ITEMS, _PAIRS: a length of
# `width` bytes, then that many objects or pairs. _EXT: `width` bytes of data (negative: a
# length of -width bytes), a type byte before it; the data is walked as the object it holds.
_FIXED, _TEXT_OF, _BYTES_OF, _ITEMS, _PAIRS, _EXT = range(6)
_HEADS: dict[int, tuple[int, int]] = {
    0xC0: (_FIXED, 0), 0xC2: (_FIXED, 0), 0xC3: (_FIXED, 0),
    0xC4: (_BYTES_OF, 1), 0xC5: (_BYTES_OF, 2), 0xC6: (_BYTES_OF, 4),
    0xC7: (_EXT, -1), 0xC8: (_EXT, -2), 0xC9: (_EXT, -4),
    0xCA: (_FIXED, 4), 0xCB: (_FIXED, 8), 0xCC: (_FIXED, 1), 0xCD: (_FIXED, 2),
    0xCE: (_FIXED, 4), 0xCF: (_FIXED, 8), 0xD0: (_FIXED, 1), 0xD1: (_FIXED, 2),
    0xD2: (_FIXED, 4), 0xD3: (_FIXED, 8),
    0xD4: (_EXT, 1), 0xD5: (_EXT, 2), 0xD6: (_EXT, 4), 0xD7: (_EXT, 8), 0xD8: (_EXT, 16),
    0xD9: (_TEXT_OF, 1), 0xDA: (_TEXT_OF, 2), 0xDB: (_TEXT_OF, 4),
    0xDC: (_ITEMS, 2), 0xDD: (_ITEMS, 4), 0xDE: (_PAIRS, 2), 0xDF: (_PAIRS, 4),
}  # fmt: skip


def msgpack_footprint(payload: bytes, most: int) -> int:
    """At most what `payload`, msgpack, takes once unpacked; past `most`, some figure past it."""
    dense = len(payload.translate(None, _ASCII))
    glance = _PER_BYTE * len(payload) + _PER_OBJECT * dense
    if glance <= _AT_A_GLANCE and dense <= len(payload) // 4:
        return glance
    walked = _walk(payload, most)
    return glance if walked is None else min(glance, walked)


def _walk(payload: bytes, most: int) -> int | None:
    """What unpacking `payload` takes, object by object, or a figure past `most` once past it.

    None if `payload` does not parse so (the caller's other bound then stands).
    """
    size, pos, pending, cost = len(payload), 0, 1, 0
    try:
        while pending and cost <= most:
            head = payload[pos]
            pos, pending = pos + 1, pending - 1
            if head < 0x80:  # a positive fixint: shared, its pointer is its container's
                continue
            if head >= 0xE0:
                cost += _NUMBER
            elif head < 0x90:
                pending += 2 * (head & 0x0F)
                cost += _DICT + _ENTRY * (head & 0x0F)
            elif head < 0xA0:
                pending += head & 0x0F
                cost += _LIST + _ITEM * (head & 0x0F)
            elif head < 0xC0:
                pos += head & 0x1F
                cost += _TEXT + _WIDEST * (head & 0x1F)
            else:
                kind, width = _HEADS[head]
                if kind == _FIXED:
                    cost += _NUMBER if width else 0
                    pos += width
                    continue
                if kind == _EXT:
                    pos += 1 - width if width < 0 else 1
                    pending += 1
                    cost += _EXTENSION
                    continue
                length = int.from_bytes(payload[pos : pos + width], "big")
                pos += width
                if kind == _TEXT_OF:
                    cost += _text(payload, pos, length)
                    pos += length
                elif kind == _BYTES_OF:
                    pos += length
                    cost += _TEXT + length
                elif kind == _ITEMS:
                    pending += length
                    cost += _LIST + _ITEM * length
                else:
                    pending += 2 * length
                    cost += _DICT + _ENTRY * length
    except (IndexError, KeyError):  # cut short, or 0xC1 (never used)
        return None
    if cost > most or pos == size:
        return cost
    return None


def _text(payload: bytes, start: int, length: int) -> int:
    """What a str of `length` UTF-8 bytes takes: one byte a character if all ASCII."""
    if length > 64 and payload[start : start + length].isascii():
        return _TEXT + length
    return _TEXT + _WIDEST * length


# -- naming the thread -------------------------------------------------------------------------


@contextlib.contextmanager
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
