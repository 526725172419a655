"""Ferry's SQLite tables for checkpoints and writes: small keys, one row per step and per task.

LangGraph's tables repeat the thread id (often 36-42 characters) and two 36-character ids in
every row, and a turn of Ferry's loop writes three dozen rows: on the bench's workload the
keys alone outweighed the messages. Here a thread is a small integer (`ferry_threads`, rows
never deleted, so a process may keep the number it once read), a UUID id is its 16 bytes,
and a task's writes are one row, each write a record in it. Any other id is kept as text
(it sorts before every UUID one).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, get_checkpoint_metadata

from graph.storage.codec.reads import StoredValueError

THREADS_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_threads ("
    "id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL UNIQUE)"
)
STEPS_TABLE = """
CREATE TABLE IF NOT EXISTS ferry_steps (
    thread INTEGER NOT NULL,
    ns TEXT NOT NULL,
    id BLOB NOT NULL,
    parent BLOB,
    snapshot INTEGER NOT NULL,
    type NOT NULL,
    value BLOB NOT NULL,
    metadata TEXT,
    PRIMARY KEY (thread, ns, id)
) WITHOUT ROWID"""
"""A checkpoint: `value` holds [checkpoint, metadata] (the checkpoint without its id, which is
the key), `type` its type tag (`code_of`); a row moved from LangGraph's table keeps its
checkpoint as it was, its metadata as LangGraph's JSON in `metadata`. `snapshot` is 1 when
the checkpoint holds the messages itself."""
WRITES_TABLE = """
CREATE TABLE IF NOT EXISTS ferry_writes (
    thread INTEGER NOT NULL,
    ns TEXT NOT NULL,
    id BLOB NOT NULL,
    task BLOB NOT NULL,
    task_path TEXT NOT NULL,
    records BLOB NOT NULL,
    PRIMARY KEY (thread, ns, id, task)
) WITHOUT ROWID"""
"""A task's writes at a checkpoint: a msgpack array of `[idx, channel, type, value]`, at most
one per `idx` (channel and type as `code_of` stores them)."""
PARTS_TABLE = """
CREATE TABLE IF NOT EXISTS ferry_parts (
    thread INTEGER NOT NULL,
    ns TEXT NOT NULL,
    id BLOB NOT NULL,
    prev BLOB,
    first INTEGER NOT NULL,
    end INTEGER NOT NULL,
    type NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (thread, ns, id)
) WITHOUT ROWID"""
"""A part of a thread's messages (`graph.storage.sqlite.parts`): the messages `first`..`end` of the
history at step `id`, continuing the part at step `prev` (whose `end` is this one's `first`);
a first part has no `prev` and `first` 0."""
TABLES = (THREADS_TABLE, STEPS_TABLE, WRITES_TABLE, PARTS_TABLE)
"""The steps' tables (all of Ferry's: `graph.storage.sqlite.layout_versions.ferry_tables`)."""

UNBOUNDED_CHANNEL = "messages"
"""The delta channel whose history Ferry rebuilds itself (`graph.state`)."""

Record = tuple[int, str, str, bytes]
"""One write: idx, channel, the value's type tag and bytes."""

NAMES = (
    "null",
    "msgpack",
    "msgpack+zd1",
    "ferry-msgs",
    "ferry-msgs+zd1",
    "msgpack+aes",
    "msgpack+zd1+aes",
    "ferry-msgs+aes",
    "ferry-msgs+zd1+aes",
    "messages",
    "stop_reason",
    "__start__",
    "__pregel_tasks",
    "branch:to:call_model",
    "branch:to:check",
    "branch:to:execute_tool",
    "__error__",
    "__interrupt__",
    "__resume__",
    "__scheduled__",
    "__return__",
    "msgpack+zd2",
    "msgpack+zd2+aes",
    "ferry-part",
    "released_calls",
)
"""The type tags and channel names a step writes most, stored as their index here (one byte
instead of up to 18). Frozen: a name is only ever appended; any other is stored as text."""
_CODES = {name: code for code, name in enumerate(NAMES)}


def code_of(name: str) -> int | str:
    """A type tag or channel name as stored."""
    return _CODES.get(name, name)


def name_of(stored: Any) -> str:
    """The type tag or channel name a stored code stands for."""
    if type(stored) is str:
        return stored
    if type(stored) is int and 0 <= stored < len(NAMES):
        return NAMES[stored]
    raise StoredValueError("a stored name is not one Ferry writes")


def key_of(text: str) -> bytes | str:
    """An id as stored: a UUID as its 16 bytes, anything else as it is."""
    if len(text) == 36:
        try:
            parsed = uuid.UUID(text)
        except ValueError:
            return text
        if str(parsed) == text:
            return parsed.bytes
    return text


def text_of(key: Any) -> str:
    """The id a stored key stands for."""
    if isinstance(key, bytes) and len(key) == 16:
        return str(uuid.UUID(bytes=key))
    if isinstance(key, str):
        return key
    raise StoredValueError(f"a stored id of type {type(key).__name__} is not one Ferry writes")


def stored_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """A checkpoint's metadata as stored: exactly what LangGraph gave, with the config's own.

    `counters_since_delta_snapshot` is kept as counted, so LangGraph's snapshot cadence and
    `get_tuple` see what was put. Files written by earlier releases hold the `messages` superstep
    count as 0: that reads as a count restarted then, and continues.
    """
    return dict(get_checkpoint_metadata(config, metadata))


def legacy_metadata(text: str | bytes | None) -> dict[str, Any]:
    """The metadata of a row moved from LangGraph's table: its JSON object."""
    value = json.loads(text) if text else {}
    if not isinstance(value, dict):
        raise StoredValueError("stored metadata is not an object")
    return value


def packed(records: list[Record]) -> bytes:
    """A task's records as stored: one msgpack array of them, names as codes."""
    return ormsgpack.packb(
        [
            [idx, code_of(channel), code_of(type_tag), data]
            for idx, channel, type_tag, data in records
        ]
    )


def unpacked(blob: Any) -> list[Record]:
    """A task's stored records; a malformed row is refused, never guessed at."""
    try:
        value = ormsgpack.unpackb(blob) if isinstance(blob, bytes) else None
    except ormsgpack.MsgpackDecodeError:
        value = None
    if not isinstance(value, list):
        raise StoredValueError("stored writes are not in Ferry's form")
    records: list[Record] = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 4):
            raise StoredValueError("stored writes are not in Ferry's form")
        idx, channel, type_tag, data = item
        if not (type(idx) is int and type(data) is bytes):
            raise StoredValueError("stored writes are not in Ferry's form")
        records.append((idx, name_of(channel), name_of(type_tag), data))
    return records


def merged(stored: list[Record], new: list[Record], replace: bool) -> list[Record]:
    """A task's records after a `put_writes`: one per index, in index order."""
    by_index = {record[0]: record for record in stored}
    for record in new:
        if replace or record[0] not in by_index:
            by_index[record[0]] = record
    return sorted(by_index.values(), key=lambda record: record[0])


# -- channel versions ------------------------------------------------------------------------
# LangGraph's SQLite savers number versions with a zero-padded counter plus a random fraction,
# about 50 bytes per channel in every checkpoint: more than the messages of a typical step.
# Ferry writes `0.<letter><digits>` instead (`0.a7`, `0.c123`: the letter is the number of
# digits, so the strings sort as the numbers do), 5-8 bytes. Every LangGraph version begins
# with 32 zero-padded digits, and `"0." < "00"`, so any LangGraph version sorts after every
# Ferry one: a thread that LangGraph's own code continues (the server numbers versions itself)
# keeps ordering, and Ferry continues such a thread in LangGraph's format. Ferry before this
# format wrote small integers, which `ferry migrate` spells in this one
# (`graph.storage.sqlite.migration`).
_PREFIX = "0."


def compact_version(number: int) -> str:
    """Version `number` in Ferry's format."""
    digits = str(number)
    return f"{_PREFIX}{chr(ord('a') + len(digits) - 1)}{digits}"


def version_number(version: str | int | float | None) -> int:
    """The counter a version (Ferry's, LangGraph's or an old Ferry's integer) carries."""
    if version is None:
        return 0
    if isinstance(version, int | float):
        return int(version)
    if version.startswith(_PREFIX):
        return int(version[3:])
    return int(version.split(".")[0])


def next_version(current: str | int | float | None) -> str | int:
    """The version after `current` in Ferry's format (an old file's integers stay integers).

    `current` is not in LangGraph's format: a thread in that one goes on in it.
    """
    if isinstance(current, int):
        return current + 1  # a file not yet upgraded (read-only): keep its integers
    return compact_version(version_number(current) + 1)


def is_langgraphs(version: object) -> bool:
    """Whether a version is in LangGraph's format (`<32 digits>.<fraction>`), not Ferry's."""
    return isinstance(version, str) and not version.startswith(_PREFIX)
