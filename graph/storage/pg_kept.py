"""What Ferry's Postgres savers keep beside LangGraph's rows: histories and thread summaries.

Mixed into `FerryPostgresSaver` and `AsyncFerryPostgresSaver` before LangGraph's savers: the
messages are rebuilt from the nearest known history (`graph.storage.pg_history`), and the sync
saver rewrites each thread's summary row as it puts its checkpoints (the async one, the
server's, leaves its threads to be summarised by the next listing).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

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

import graph.storage.pg_history as pg
from graph.storage.allowlist import naming_thread
from graph.storage.internals import DeltaChannelHistory
from graph.storage.summaries import SAVE_POSTGRES, Row, listing_rows
from graph.storage.threads import summary_after_put

log = logging.getLogger("ferry.saver")
History = Mapping[str, DeltaChannelHistory]


def _key(config: RunnableConfig, target: str) -> pg.Key:
    configurable = config["configurable"]
    return (str(configurable["thread_id"]), configurable.get("checkpoint_ns", ""), target)


def _saved_at(row: Mapping[str, Any] | None) -> tuple[str | None, int]:
    return (row["checkpoint_id"], int(row["messages"])) if row else (None, 0)


def _known(kept: dict[str, list[Any]], saved_at: str | None) -> list[str]:
    return [*kept, *([saved_at] if saved_at else [])]


class KeepsHistories(PostgresSaver):
    """A Postgres saver that keeps rebuilt histories and thread summaries (see the module)."""

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
            return {"messages": {"writes": [], "seed": list(known)}}
        thread_id, namespace, target = key
        kept = self.kept.of_thread(thread_id, namespace)
        seed: Any = None
        with self._cursor() as cur:
            cur.execute(pg.SAVED_AT, (thread_id, namespace))
            saved_at, saved_length = _saved_at(cur.fetchone())
            cur.execute(pg.CHAIN, pg.chain_params(key, _known(kept, saved_at)))
            chain, snapshot = pg.walk(cur.fetchall(), target)
            oldest = chain[-1] if chain else None
            if oldest is not None and oldest in kept:
                seed = list(kept[oldest])
            elif oldest is not None and oldest == saved_at:
                cur.execute(pg.SAVED, (thread_id, namespace, oldest))
                seed = self._decoded(cur.fetchone(), "value")
            elif snapshot is not None:
                cur.execute(pg.SNAPSHOT, (thread_id, namespace, snapshot))
                seed = self._decoded(cur.fetchone(), "blob")
            cur.execute(pg.WRITES, (thread_id, namespace, chain))
            rows = cur.fetchall()
        entry = pg.replayed(chain, seed, rows, self.serde)
        messages = pg.folded(entry)
        if messages is None:
            return {"messages": entry}
        self.kept.keep(key, messages)
        if pg.worth_saving(messages, saved_length):
            self._save_history(key, messages)
        return {"messages": {"writes": [], "seed": list(messages)}}

    def _decoded(self, row: Mapping[str, Any] | None, column: str) -> Any:
        return self.serde.loads_typed((row["type"], row[column])) if row else None

    def _save_history(self, key: pg.Key, messages: list[Any]) -> None:
        type_tag, value = self.serde.dumps_typed(messages)
        try:
            with self._cursor() as cur:
                cur.execute(pg.SAVE, (*key, len(messages), type_tag, value))
        except psycopg.Error as error:  # e.g. a read-only role: only speed is lost
            log.debug("history of %s not saved: %s", key[0], error)

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
        """Each thread's listing row (`graph.storage.summaries.LISTING`)."""
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
            return {"messages": {"writes": [], "seed": list(known)}}
        thread_id, namespace, target = key
        kept = self.kept.of_thread(thread_id, namespace)
        seed: Any = None
        async with self._cursor() as cur:
            await cur.execute(pg.SAVED_AT, (thread_id, namespace))
            saved_at, saved_length = _saved_at(await cur.fetchone())
            await cur.execute(pg.CHAIN, pg.chain_params(key, _known(kept, saved_at)))
            chain, snapshot = pg.walk(await cur.fetchall(), target)
            oldest = chain[-1] if chain else None
            if oldest is not None and oldest in kept:
                seed = list(kept[oldest])
            elif oldest is not None and oldest == saved_at:
                await cur.execute(pg.SAVED, (thread_id, namespace, oldest))
                seed = self._decoded(await cur.fetchone(), "value")
            elif snapshot is not None:
                await cur.execute(pg.SNAPSHOT, (thread_id, namespace, snapshot))
                seed = self._decoded(await cur.fetchone(), "blob")
            await cur.execute(pg.WRITES, (thread_id, namespace, chain))
            rows = await cur.fetchall()
        entry = pg.replayed(chain, seed, rows, self.serde)
        messages = pg.folded(entry)
        if messages is None:
            return {"messages": entry}
        self.kept.keep(key, messages)
        if pg.worth_saving(messages, saved_length):
            type_tag, value = self.serde.dumps_typed(messages)
            try:
                async with self._cursor() as cur:
                    await cur.execute(pg.SAVE, (*key, len(messages), type_tag, value))
            except psycopg.Error as error:
                log.debug("history of %s not saved: %s", key[0], error)
        return {"messages": {"writes": [], "seed": list(messages)}}

    def _decoded(self, row: Mapping[str, Any] | None, column: str) -> Any:
        return self.serde.loads_typed((row["type"], row[column])) if row else None
