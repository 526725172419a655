"""A stock LangGraph SQLite saver handed to `build_graph`: its connection, Ferry's storage.

LangGraph's docs teach `build_graph(checkpointer=SqliteSaver(conn))`. The stock saver stores
every value with all its fields, versions 50 bytes long, LangGraph's periodic snapshots of
the whole history and ids as text in every row, and rebuilds a history by walking every
ancestor: measured on the bench workload (bench/README.md), 4.1× the messages' bytes at 80
turns, 34 ms per model call and 128 ms per `get_state` at 320 turns. Ferry's serializer reads
everything LangGraph's default one writes, so a stock `SqliteSaver` with the default
serializer is replaced by a `FerrySaver` on the same connection, sharing its lock: the rows
the stock saver stored move into Ferry's tables (`graph.storage.sqlite.migration`), and the caller's
stock object, which reads only LangGraph's tables, no longer sees them (the graph does). Any
other stock SQLite saver (the async one, one with its own serializer) is kept, and its cost
logged once.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from graph.settings import Settings

log = logging.getLogger("ferry.saver")
COST = (
    "about 4× the messages' bytes at 80 turns (Ferry's saver: 1.3×), slower model calls "
    "(34 vs 30 ms) and 128 ms per get_state at 320 turns (bench/README.md)"
)
"""What a stock saver costs a Ferry thread, as the bench measured it."""


def adopted(checkpointer: BaseCheckpointSaver[Any], settings: Settings) -> BaseCheckpointSaver[Any]:
    """`checkpointer`, or a `FerrySaver` on its connection if it is a stock `SqliteSaver`."""
    from graph.storage.codec.serde import serializer
    from graph.storage.sqlite.saver import FerrySaver

    if isinstance(checkpointer, FerrySaver) or not _is_stock_sqlite(checkpointer):
        return checkpointer
    if type(checkpointer) is SqliteSaver and _is_default(checkpointer.serde):
        saver = FerrySaver(checkpointer.conn, serializer(settings))
        # One connection, one lock and one format, whichever of the two the caller goes on using.
        saver.lock = checkpointer.lock
        checkpointer.serde = saver.serde
        log.info(
            "a stock SqliteSaver's connection now stores Ferry's tables: read the threads "
            "through the graph (or graph.storage.sqlite_saver), not that SqliteSaver"
        )
        return saver
    _warn_once(type(checkpointer).__name__)
    return checkpointer


def _is_stock_sqlite(checkpointer: BaseCheckpointSaver[Any]) -> bool:
    return type(checkpointer).__module__.startswith("langgraph.checkpoint.sqlite")


def _is_default(serde: Any) -> bool:
    """Whether `serde` is LangGraph's serializer as `SqliteSaver` makes it by default."""
    if type(serde) is not JsonPlusSerializer:
        return False
    settings = {k: v for k, v in vars(serde).items() if not callable(v)}
    return settings == {k: v for k, v in vars(JsonPlusSerializer()).items() if not callable(v)}


@functools.cache
def _warn_once(saver_name: str) -> None:
    log.warning(
        "a stock %s stores Ferry's threads at %s; pass graph.storage.sqlite_saver(path) "
        "(the same file, tables and threads) to store them in Ferry's format",
        saver_name,
        COST,
    )
