"""What Ferry's Postgres savers keep beside LangGraph's rows: the histories they rebuild.

One `KeptHistories` is held by each saver, sync (`postgres.saver`) or async (`postgres.aio`),
as LangGraph's `BasePostgresSaver` holds what its two savers share: the messages are rebuilt
from the nearest known history (`graph.storage.postgres.history`), written once as steps of
queries that each saver runs on its own cursor (`drive`, `adrive`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import psycopg
from langchain_core.runnables import RunnableConfig

import graph.storage.postgres.history as pg
from graph.storage.codec.allowlist import naming_thread
from graph.storage.codec.serde import collection_paused
from graph.storage.history.folding import Fold
from graph.storage.history.held import Histories
from graph.storage.history.messages import History, Key, latest_key, named_key, no_messages, seeded
from graph.storage.internals import postgres_cursor

log = logging.getLogger("ferry.saver")


class KeptHistories:
    """The histories a Postgres saver rebuilt, and where each thread's is saved."""

    def __init__(self, serde: Callable[[], Any], fold: Callable[[], Fold | None]) -> None:
        # The saver's serializer and reducer, read when used (a caller may replace either).
        self._serde, self._fold = serde, fold
        self.held = Histories()
        self.saved = pg.SavedPoints()

    def held_at(self, key: Key) -> History | None:
        """The history at `key` if this process holds it."""
        known = self.held.get(key)
        return None if known is None else seeded(known)

    def rebuild(self, key: Key) -> pg.Steps[pg.Rebuilt]:
        """The steps that rebuild the history at `key` (`pg.rebuild`)."""
        return pg.rebuild(self.held, self.saved, self._serde(), key, self._fold())

    def rebuilt(
        self, key: Key, rebuilt: pg.Rebuilt
    ) -> tuple[History, pg.Steps[pg.Saved | None] | None]:
        """What to hand LangGraph, and the steps that save the history if that is due."""
        entry, messages, saved_length = rebuilt
        if messages is None:
            return {"messages": entry}, None
        self.held.keep(key, messages)
        steps = pg.keep_saved(self.saved, self._serde(), key, messages, saved_length)
        return seeded(messages), steps

    def forget(self, thread_id: str) -> None:
        """Drop every history held for a thread (it was deleted)."""
        self.held.forget(thread_id)
        self.saved.forget(thread_id)


def messages_history(saver: Any, config: RunnableConfig) -> History:
    """`get_delta_channel_history` of `messages` for a sync saver holding `saver.kept`."""
    kept: KeptHistories = saver.kept
    with naming_thread(config):
        key = named_key(config) or latest_key(saver.get_tuple(config))
        if key is None:
            return no_messages()
        if (held := kept.held_at(key)) is not None:
            return held
        with postgres_cursor(saver) as cur:
            history, steps = kept.rebuilt(key, drive(cur, kept.rebuild(key)))
        if steps is not None:
            try:  # in one transaction; a failure (a read-only role) loses only speed
                with postgres_cursor(saver) as cur, cur.connection.transaction():
                    kept.saved.know(key[:2], drive(cur, steps))
            except psycopg.Error as error:
                log.debug("history of %s not saved: %s", key[0], error)
        return history


async def amessages_history(saver: Any, config: RunnableConfig) -> History:
    """`messages_history` for an async saver."""
    kept: KeptHistories = saver.kept
    with naming_thread(config):
        key = named_key(config) or latest_key(await saver.aget_tuple(config))
        if key is None:
            return no_messages()
        if (held := kept.held_at(key)) is not None:
            return held
        async with postgres_cursor(saver) as cur:
            rebuilt = await adrive(cur, kept.rebuild(key))
        history, steps = kept.rebuilt(key, rebuilt)
        if steps is not None:
            try:
                async with postgres_cursor(saver) as cur, cur.connection.transaction():
                    kept.saved.know(key[:2], await adrive(cur, steps))
            except psycopg.Error as error:
                log.debug("history of %s not saved: %s", key[0], error)
        return history


def _step(steps: pg.Steps[pg.T], answer: Any) -> tuple[Any, Any]:
    """The steps' next query, or (None, what they returned); rebuilding pauses the collector."""
    with collection_paused():
        try:
            return steps.send(answer), None
        except StopIteration as done:
            return None, done.value


def drive(cur: psycopg.Cursor[Any], steps: pg.Steps[pg.T]) -> pg.T:
    """Run the steps' queries on `cur`; rebuilding messages pauses the collector (see serde)."""
    answer: Any = None
    while True:
        query, returned = _step(steps, answer)
        if query is None:
            return cast(pg.T, returned)
        cur.execute(query.sql, query.params)
        if query.want == "count":
            answer = cur.rowcount
        else:
            answer = cur.fetchone() if query.want == "one" else cur.fetchall()


async def adrive(cur: psycopg.AsyncCursor[Any], steps: pg.Steps[pg.T]) -> pg.T:
    """`drive`, awaited; the collector runs while the queries are awaited."""
    answer: Any = None
    while True:
        query, returned = _step(steps, answer)
        if query is None:
            return cast(pg.T, returned)
        await cur.execute(query.sql, query.params)
        if query.want == "count":
            answer = cur.rowcount
        else:
            answer = await (cur.fetchone() if query.want == "one" else cur.fetchall())
