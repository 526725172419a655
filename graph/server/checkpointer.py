"""The LangGraph server's persistence: the same `FERRY_DB` file, in the same format, as the CLI.

`langgraph.json` names `checkpointer` below, so threads started in Studio continue with
`ferry ask --thread <id>`, and the other way round. It is opened where every Ferry saver is
(`graph.storage.open_async_saver`), handed Ferry's reducer: the server compiles the graph
without a saver and supplies this one per run, so `build_graph` never gets to hand it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.core.settings import get_settings
from graph.state import fold_messages
from graph.storage import open_async_saver
from graph.storage.codec.serde import serializer


@asynccontextmanager
async def checkpointer() -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open the saver on `FERRY_DB` (or `FERRY_DATABASE_URL`) for the server's lifetime."""
    settings = get_settings()
    serde = serializer(settings)
    async with open_async_saver(settings, fold=fold_messages, serde=serde) as saver:
        yield saver
