"""A thread's messages in SQLite: rebuilt from the nearest known history, kept in parts.

A checkpoint never changes once written, so the history rebuilt at a checkpoint stays true: a
running process replays only a step's new writes, a new one (`ferry history`, a restarted
server) replays the thread's in one range query (`graph.storage.sqlite.replay`), from its
newest stored part (`graph.storage.sqlite.parts`).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from graph.storage.codec.serde import collection_paused
from graph.storage.history.messages import (
    PART,
    History,
    Key,
    folded,
    latest_key,
    named_key,
    no_messages,
    seeded,
)
from graph.storage.sqlite import parts, replay
from graph.storage.sqlite.layout import key_of, text_of

if TYPE_CHECKING:
    from graph.storage.sqlite.saver import FerrySaver

log = logging.getLogger("ferry.saver")
_NEWEST_PART = "SELECT coalesce(max(end), 0) FROM ferry_parts WHERE thread = ? AND ns = ?"


def messages_history(saver: FerrySaver, config: RunnableConfig) -> History:
    """Rebuild `messages` from the nearest remembered (or snapshot, or part) checkpoint onwards."""
    key = named_key(config) or latest_key(saver.get_tuple(config))
    if key is None:
        return no_messages()
    if (known := saver.histories.get(key)) is not None:
        return seeded(known)
    found: list[list[Any]] = []  # the remembered history the walk started at
    # The histories this process remembers on the thread, by stored key: the walk then asks
    # about each ancestor without spelling its id.
    known_keys = {key_of(at): (*key[:2], at) for at in saver.histories.of_thread(key[:2])}

    def remembered(step: Any) -> list[Any] | None:
        ancestor = known_keys.get(step)
        if ancestor is not None and (known := saver.histories.get(ancestor)) is not None:
            found.append(known)
            return known
        return None

    with saver.cursor(transaction=False) as cur, collection_paused():
        number = saver.file.thread_number(cur, key[0])
        if number is None:
            return no_messages()
        replayed = replay.replay(
            cur, saver.serde, saver.step_values, (number, key[1], key_of(key[2])), remembered
        )
    writes = [value for _, _, value in replayed["writes"]]
    seed = replayed.get("seed")
    messages = folded(seed, writes, saver.fold, checked=bool(found) and found[-1] is seed)
    if messages is None:
        # An edit in Studio, or not Ferry's messages: LangGraph's reducer, with the task ids.
        replayed["writes"] = [(text_of(t), c, v) for t, c, v in replayed["writes"]]
        return {"messages": replayed}
    saver.histories.keep(key, messages)
    keep_parts(saver, number, key, messages)
    return seeded(messages)


def keep_parts(saver: FerrySaver, number: int, key: Key, messages: list[Any]) -> None:
    """Store the history as a part once it has grown by `PART` since the newest."""
    thread = key[:2]
    if (end := saver.part_ends.get(thread)) is None:
        with saver.cursor(transaction=False) as cur:
            cur.execute(_NEWEST_PART, (number, thread[1]))
            end = saver.part_ends[thread] = int(cur.fetchone()[0])
    if len(messages) < end + PART:
        return
    target = key_of(key[2])
    try:
        with saver.cursor() as cur, collection_paused():
            saver.file.begin_writing(cur)
            walk = replay.ancestors(cur, number, thread[1], target)
            saver.part_ends[thread] = parts.compact(
                cur, saver.serde, (number, thread[1]), target, messages, walk
            )
    except sqlite3.OperationalError as error:  # e.g. a read-only file: only speed is lost
        log.debug("history of %s not kept in parts: %s", thread[0], error)
        saver.part_ends[thread] = len(messages)
