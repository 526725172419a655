"""A checkpointer handed to `build_graph` is used as it is; a stock SQLite saver's cost is logged.

LangGraph's docs teach `build_graph(checkpointer=SqliteSaver(conn))`, and the file may hold
another application's threads too: Ferry neither replaces the caller's saver nor changes it
(its serializer, its lock), and never moves the rows it stores. What that costs a Ferry thread
is logged once per process: the stock saver stores every value with all its fields and
versions 50 bytes long, and rebuilds a history by walking every ancestor (measured on the bench
workload, bench/README.md); and Ferry's extras live in Ferry's saver only, so on any other
saver a run takes no lease (two runs on one thread are not kept apart) and a side-effect tool's
start is not recorded (one cut short by a crash may run again on resume). Ferry's layout is
for files Ferry opens itself (`FERRY_DB`, `graph.storage.sqlite_saver(path)`); `ferry migrate
FILE` converts a stock file's Ferry threads first.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

log = logging.getLogger("ferry.saver")
COST = (
    "about 4× the messages' bytes at 80 turns (Ferry's saver: 1.3×), slower model calls "
    "(34 vs 30 ms) and 128 ms per get_state at 320 turns (bench/README.md)"
)
"""What a stock saver costs a Ferry thread, as the bench measured it."""


def as_given(checkpointer: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """`checkpointer` itself, unchanged; for a stock SQLite saver, its cost logged once."""
    if type(checkpointer).__module__.startswith("langgraph.checkpoint.sqlite"):
        _warn_once(type(checkpointer).__name__)
    return checkpointer


@functools.cache
def _warn_once(saver_name: str) -> None:
    log.warning(
        "a stock %s stores Ferry's threads at %s, and takes no lease per run nor records "
        "side-effect calls started; for Ferry's format: ferry migrate FILE, then "
        "graph.storage.sqlite_saver(path) on the same file",
        saver_name,
        COST,
    )
