"""`ferry cancel` on a turn a client watches: the client is told, the worker says nothing.

The watcher's `progress` update waits in the workflow for the turn's next output; a cancelled
turn closes with it still waiting, and the watcher reads the cancel from the closed workflow.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from graph.temporal import connect, start_turn, watch
from graph.temporal.client import TurnFailed
from tests.support.held import HOLD_LIMIT_S, held_step
from tests.support.servers.openai import OpenAIServer, openai_tool_calls
from tests.temporal.helpers import WAIT_LIMIT_S, start_worker, stop
from tests.temporal.worker_process import tool_log

UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
CANCEL_REQUESTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED


async def _event_time(handle: WorkflowHandle[Any, Any], kind: EventType.ValueType) -> datetime:
    """When the workflow's history first holds an event of `kind`, once it does."""
    async with asyncio.timeout(WAIT_LIMIT_S):
        while True:
            for event in (await handle.fetch_history()).events:
                if event.event_type == kind:
                    return event.event_time.ToDatetime()
            await asyncio.sleep(0.05)


async def _beat_since(handle: WorkflowHandle[Any, Any], since: datetime) -> None:
    """Wait until the running step heartbeats after `since`: its worker has heard the cancel."""
    async with asyncio.timeout(WAIT_LIMIT_S):
        while True:
            running = (await handle.describe()).raw_description.pending_activities
            if running and running[0].last_heartbeat_time.ToDatetime() > since:
                return
            await asyncio.sleep(0.05)


def test_a_cancelled_turn_ends_its_watch_without_a_warning_on_the_worker(
    temporal_env: dict[str, str], model: OpenAIServer
) -> None:
    arrived, release = threading.Event(), threading.Event()
    # The held reply asks for a tool: the turn would go on after it, and the cancel stops it.
    model.script([held_step(arrived, release, openai_tool_calls(("lookup", {"key": "k"})))])
    worker = start_worker(temporal_env, tool_log())

    async def main() -> str:
        client = await connect()
        handle = await start_turn(client, "watched", "What is k?")
        watching = asyncio.create_task(watch(handle, on_line=lambda line: None))
        assert await asyncio.to_thread(arrived.wait, HOLD_LIMIT_S)
        await _event_time(handle, UPDATE_ACCEPTED)  # the watcher's update waits in the workflow
        await handle.cancel()
        # The step ends cancelled, without output: the watcher's update is still waiting.
        await _beat_since(handle, await _event_time(handle, CANCEL_REQUESTED))
        release.set()
        with pytest.raises(TurnFailed) as failed:
            await watching
        return str(failed.value)

    try:
        told = asyncio.run(main())
    finally:
        release.set()
        stop(worker)
    assert told == (
        "thread watched: its turn on Temporal was cancelled (ferry cancel); "
        "continue it with: ferry resume --thread watched"
    )
    said = tool_log().with_suffix(".worker.log").read_text()
    assert "Warning" not in said, said  # no "workflow finished while update handlers run"
