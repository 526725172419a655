"""Stored values an attacker who can write the database might plant, each naming code to run.

Every payload, if Ferry obeyed it, would create `marker` (or import `PLANTED_MODULE`, whose
import creates it). The tests plant them in SQLite and Postgres rows and check that reading
the thread refuses them and that the marker never appears. Beside them, rows in a form Ferry
never writes (`graph.storage.sqlite.layout`), which a reader must refuse rather than guess at.
"""

from __future__ import annotations

import json
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

import ormsgpack
import zstandard
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
)

from graph.storage.sqlite import layout

PLANTED_MODULE = "ferry_planted_module"


def _ext(code: int, *entry: object) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(list(entry)))


class _Pickled:
    """Unpickling it runs `os.system`."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (self.command,)


def plant_module(folder: Path, marker: Path) -> None:
    """A module on `folder` whose import creates `marker` (for the importlib payload)."""
    (folder / f"{PLANTED_MODULE}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")


def hostile_values(marker: Path) -> dict[str, tuple[str, bytes]]:
    """(type tag, stored bytes) of each planted value, by name."""
    touch = f"touch {marker}"
    code = f"open({str(marker)!r}, 'w').close()"
    in_msgpack = {
        "os.system": _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", touch),
        "subprocess": _ext(EXT_CONSTRUCTOR_POS_ARGS, "subprocess", "run", [["touch", str(marker)]]),
        "builtins.eval": _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "eval", code),
        "builtins.exec kwargs": _ext(EXT_CONSTRUCTOR_KW_ARGS, "builtins", "exec", {"source": code}),
        "importlib": _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "importlib", "import_module", PLANTED_MODULE),
        "method call": _ext(EXT_METHOD_SINGLE_ARG, "os", "system", touch, "__call__"),
        "datetime lookalike": _ext(EXT_METHOD_SINGLE_ARG, "os", "datetime", touch, "fromisoformat"),
        "pydantic v2": _ext(EXT_PYDANTIC_V2, "os", "system", {"command": touch}, "model_validate"),
        "pydantic v1": _ext(EXT_PYDANTIC_V1, "os", "system", {"command": touch}),
        "nested in a message": _ext(
            EXT_PYDANTIC_V2,
            "langchain_core.messages.human",
            "HumanMessage",
            {"content": "hi", "additional_kwargs": {"x": _ext(0, "os", "system", touch)}},
            "model_validate",
        ),
    }
    values = {name: ("msgpack", ormsgpack.packb([ext])) for name, ext in in_msgpack.items()}
    values["compact form, foreign class"] = ("ferry-msgs", ormsgpack.packb([["system", {}]]))
    values["compact form, ext inside"] = (
        "ferry-msgs",
        ormsgpack.packb([["HumanMessage", {"content": in_msgpack["os.system"]}]]),
    )
    values["zstd-wrapped"] = ("msgpack+zstd", zstandard.compress(values["os.system"][1]))
    values["zlib-wrapped"] = ("msgpack+zlib", zlib.compress(values["importlib"][1]))
    values["pickle"] = ("pickle", pickle.dumps(_Pickled(touch)))
    values["not msgpack at all"] = ("msgpack", b"\xc1")
    for name, path in {
        "json constructor os.system": ["os", "system"],
        "json constructor subprocess": ["subprocess", "Popen"],
        "json constructor in langchain": ["langchain", "schema", "runnable", "RunnableLambda"],
    }.items():
        envelope = {"lc": 1, "type": "constructor", "id": path, "kwargs": {"args": touch}}
        values[name] = ("json", json.dumps([envelope]).encode())
    lc2 = {"lc": 2, "type": "constructor", "id": ["os", "system"], "args": [touch]}
    values["json lc2 envelope"] = ("json", json.dumps(lc2).encode())
    return values


def misshapen_values(serde: Any) -> dict[str, tuple[str, bytes]]:
    """Values that load, but are no checkpoint (nor Ferry's [checkpoint, metadata] pair)."""
    return {
        "a list": serde.dumps_typed(["not", "a", "checkpoint"]),
        "a text": serde.dumps_typed("checkpoint"),
        "a pair of lists": serde.dumps_typed([[], []]),
    }


FOREIGN_TYPE_CODES: dict[str, Any] = {
    "the first code past the vocabulary": len(layout.NAMES),
    "a negative code": -1,
    "a code as a float": 1.0,  # msgpack's, were it rounded
    "a code as bytes": b"\x01",
}
"""What a planted `ferry_steps.type` may hold that is no type tag Ferry writes."""


def malformed_records(record: layout.Record) -> dict[str, Any]:
    """`ferry_writes.records` in forms Ferry never writes, made from one good `record`.

    Each keeps the record's own value where it can, so that only the form is wrong.
    """
    idx, channel, tag, data = record
    name, kind, past = layout.code_of(channel), layout.code_of(tag), len(layout.NAMES)
    return {
        "not msgpack": b"\xc1",
        "text, not a blob": "[]",
        "a map, not an array": ormsgpack.packb({channel: data}),
        "one record, not an array of them": ormsgpack.packb([idx, name, kind, data]),
        "a record of three fields": ormsgpack.packb([[idx, name, data]]),
        "an index that is not an integer": ormsgpack.packb([[str(idx), name, kind, data]]),
        "a value that is not bytes": ormsgpack.packb([[idx, name, kind, data.hex()]]),
        "a channel code past the vocabulary": ormsgpack.packb([[idx, past, kind, data]]),
        "a type code past the vocabulary": ormsgpack.packb([[idx, name, past, data]]),
        "a negative type code": ormsgpack.packb([[idx, name, -1, data]]),
        "a type code as a boolean": ormsgpack.packb([[idx, name, True, data]]),
        "a channel code as a float": ormsgpack.packb(
            [[idx, float(layout.NAMES.index(channel)), kind, data]]
        ),
    }


# --- rows in LangGraph's own tables, as a file from before Ferry's layout holds them ---------

STOCK_COLUMNS = {
    "checkpoints": (
        "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type",
        "checkpoint", "metadata",
    ),
    "writes": (
        "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel",
        "type", "value",
    ),
}  # fmt: skip


def loosen_stock_tables(conn: Any) -> None:
    """LangGraph's `checkpoints` and `writes`, rebuilt without their NOT NULLs, rows kept.

    What a file written by another tool (or a person) may hold: its tables are not LangGraph's
    to enforce.
    """
    for table, columns in STOCK_COLUMNS.items():
        conn.execute(f"CREATE TABLE loose_{table} ({', '.join(columns)})")
        conn.execute(f"INSERT INTO loose_{table} SELECT {', '.join(columns)} FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"ALTER TABLE loose_{table} RENAME TO {table}")


def plant_stock_row(conn: Any, table: str, **values: Any) -> None:
    """Insert a row into LangGraph's `table`, its columns as given (the rest NULL)."""
    columns = ", ".join(values)
    marks = ", ".join("?" * len(values))
    conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(values.values()))


SPOILED_STOCK_ROWS: dict[str, tuple[str, dict[str, Any]]] = {
    "a checkpoint with a NULL id": ("checkpoints", {"checkpoint_id": None}),
    "a checkpoint id that is bytes": ("checkpoints", {"checkpoint_id": b"\x00\xff"}),
    "a checkpoint with a NULL thread": ("checkpoints", {"thread_id": None}),
    "a thread id that is bytes": ("checkpoints", {"thread_id": b"bad"}),
    "a checkpoint with a NULL namespace": ("checkpoints", {"checkpoint_ns": None}),
    "a parent id that is bytes": ("checkpoints", {"parent_checkpoint_id": b"\x01"}),
    "a checkpoint that is text": ("checkpoints", {"checkpoint": "not bytes"}),
    "a type that is bytes": ("checkpoints", {"type": b"\x01"}),
    "a write with a NULL task": ("writes", {"task_id": None}),
    "a write with a NULL checkpoint id": ("writes", {"checkpoint_id": None}),
    "a write whose value is text": ("writes", {"value": "not bytes"}),
    "a write whose index is text": ("writes", {"idx": "first"}),
    "a write with a NULL channel": ("writes", {"channel": None}),
}
"""Rows of LangGraph's tables no saver could have written, by name: (table, the column spoiled)."""


def spoiled_stock_row(name: str, good: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The row `name` of `SPOILED_STOCK_ROWS`, made from a `good` checkpoint row's columns.

    A write is made at that checkpoint, by a task of its own.
    """
    table, change = SPOILED_STOCK_ROWS[name]
    if table == "checkpoints":
        return table, {**good, **change}
    write = {
        "thread_id": good["thread_id"], "checkpoint_ns": good["checkpoint_ns"],
        "checkpoint_id": good["checkpoint_id"], "task_id": "task", "task_path": "", "idx": 0,
        "channel": "messages", "type": "msgpack", "value": ormsgpack.packb([]),
    }  # fmt: skip
    return table, {**write, **change}
