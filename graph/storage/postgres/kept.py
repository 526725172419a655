"""What Ferry's Postgres savers keep beside LangGraph's rows: histories and thread summaries.

Mixed into `FerryPostgresSaver` and `AsyncFerryPostgresSaver` before LangGraph's savers: the
messages are rebuilt from the nearest known history (`graph.storage.postgres.history`), and the sync
saver rewrites each thread's summary row as it puts its checkpoints (the async one, the
server's, leaves its threads to be summarised by the next listing).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_id,
)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

import graph.storage.postgres.history as pg
from graph.storage.codec.allowlist import naming_thread
from graph.storage.codec.serde import collection_paused
from graph.storage.internals import DeltaChannelHistory
from graph.storage.postgres.history_sql import SELECT_SQL
from graph.storage.threads.reading import summary_after_put
from graph.storage.threads.summaries import SAVE_POSTGRES, Row, listing_rows

log = logging.getLogger("ferry.saver")
History = Mapping[str, DeltaChannelHistory]


def _key(config: RunnableConfig, target: str) -> pg.Key:
    configurable = config["configurable"]
    return (str(configurable["thread_id"]), configurable.get("checkpoint_ns", ""), target)


def _copied(messages: list[Any]) -> History:
    # A copy: the channel hands its value out (`get_state`), and a caller may edit it.
    return {"messages": {"writes": [], "seed": list(messages)}}


def _step(steps: pg.Steps[pg.T], answer: Any) -> tuple[Any, Any]:
    """The steps' next query, or (None, what they returned); rebuilding pauses the collector."""
    with collection_paused():
        try:
            return steps.send(answer), None
        except StopIteration as done:
            return None, done.value


def _drive(cur: psycopg.Cursor[Any], steps: pg.Steps[pg.T]) -> pg.T:
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


async def _adrive(cur: psycopg.AsyncCursor[Any], steps: pg.Steps[pg.T]) -> pg.T:
    """`_drive`, awaited; the collector runs while the queries are awaited."""
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


class KeepsHistories(PostgresSaver):
    """A Postgres saver that keeps rebuilt histories and thread summaries (see the module)."""

    SELECT_SQL = SELECT_SQL
    kept: pg.KeptHistories

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> History:
        """Rebuild `messages` from the nearest kept, saved or snapshot checkpoint onwards."""
        if list(channels) != ["messages"]:
            return super().get_delta_channel_history(config=config, channels=channels)
        with naming_thread(config):
            target = get_checkpoint_id(config)
            if not target:
                latest = self.get_tuple(config)
                if latest is None:
                    return {"messages": {"writes": []}}
                target = latest.config["configurable"]["checkpoint_id"]
            return self._messages_history(_key(config, target))

    def _messages_history(self, key: pg.Key) -> History:
        if (known := self.kept.get(key)) is not None:
            return _copied(known)
        with self._cursor() as cur:
            entry, messages, saved_length = _drive(cur, pg.rebuild(self.kept, self.serde, key))
        if messages is None:
            return {"messages": entry}
        self.kept.keep(key, messages)
        if (steps := pg.keep_saved(self.kept, self.serde, key, messages, saved_length)) is not None:
            self._save(key, steps)
        return _copied(messages)

    def _save(self, key: pg.Key, steps: pg.Steps[pg.Saved | None]) -> None:
        """Run saving steps in one transaction; a failure (a read-only role) loses only speed."""
        try:
            with self._cursor() as cur, cur.connection.transaction():
                known = _drive(cur, steps)
        except psycopg.Error as error:
            log.debug("history of %s not saved: %s", key[0], error)
            return
        self.kept.know_saved(key[:2], known)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Save a checkpoint, then its thread's summary row (for the main namespace)."""
        saved = super().put(config, checkpoint, metadata, new_versions)
        if (row := summary_after_put(self, saved, checkpoint)) is not None:
            self.save_summary(row)
        return saved

    def thread_summaries(self) -> list[tuple[Any, ...]]:
        """Each thread's listing row (`graph.storage.threads.summaries.LISTING`)."""
        with self._cursor() as cur:
            return listing_rows(cur)

    def save_summary(self, row: Row) -> None:
        """Write a thread's summary row; nothing if the database may not be written."""
        try:
            with self._cursor() as cur:
                cur.execute(SAVE_POSTGRES, row)
        except psycopg.Error as error:
            log.debug("summary of %s not kept: %s", row[0], error)


class AsyncKeepsHistories(AsyncPostgresSaver):
    """The async Postgres saver's side of `KeepsHistories`: the same reads, awaited."""

    SELECT_SQL = SELECT_SQL
    kept: pg.KeptHistories

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> History:
        """Rebuild `messages` from the nearest kept, saved or snapshot checkpoint onwards."""
        if list(channels) != ["messages"]:
            return await super().aget_delta_channel_history(config=config, channels=channels)
        with naming_thread(config):
            target = get_checkpoint_id(config)
            if not target:
                latest = await self.aget_tuple(config)
                if latest is None:
                    return {"messages": {"writes": []}}
                target = latest.config["configurable"]["checkpoint_id"]
            return await self._amessages_history(_key(config, target))

    async def _amessages_history(self, key: pg.Key) -> History:
        if (known := self.kept.get(key)) is not None:
            return _copied(known)
        async with self._cursor() as cur:
            rebuilt = await _adrive(cur, pg.rebuild(self.kept, self.serde, key))
        entry, messages, saved_length = rebuilt
        if messages is None:
            return {"messages": entry}
        self.kept.keep(key, messages)
        if (steps := pg.keep_saved(self.kept, self.serde, key, messages, saved_length)) is not None:
            try:
                async with self._cursor() as cur, cur.connection.transaction():
                    saved = await _adrive(cur, steps)
            except psycopg.Error as error:
                log.debug("history of %s not saved: %s", key[0], error)
            else:
                self.kept.know_saved(key[:2], saved)
        return _copied(messages)
