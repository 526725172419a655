"""Temporal's own cost of one activity on a Ferry worker: the floor under every step.

bench/temporal_scale.py reads a step's time from the turn's history, from its activity's
`ActivityTaskStarted` to its `ActivityTaskCompleted`. That span holds more than the step: the
task's way from the server to the worker's Python code, and the result's way back, which no
step can shorten. A turn's steps are dispatched eagerly: the worker that completes the
workflow task which schedules a step gets the step in the server's reply, and the server
stamps the step started as it takes that completion, before it has stored it and replied. So
the span also holds the end of the workflow task's round trip (~1 ms more than an activity a
worker polls for, timed at its handler; bench/README.md, "A Temporal step's own work").

This module's workflow, served by the bench's Ferry worker beside `FerryTurn`
(bench/temporal_worker.py) on its task queue, schedules Ferry's smallest activity
(`ferry_awaiting`: one read of a stored thread) a turn's worth of times: each dispatched as a
step is, by the same worker; the same span of each is the floor. Measured between the timed
turns, on the same thread, the machine's load weighs on both alike.
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():  # plain names and dataclasses, as workflow.py
    from graph.temporal.shapes import AWAITING_ACTIVITY


@dataclass
class FloorInput:
    thread_id: str
    activities: int


@workflow.defn(name="FerryFloor")
class FerryFloor:
    @workflow.run
    async def run(self, floor: FloorInput) -> None:
        for _ in range(floor.activities):
            await workflow.execute_activity(
                AWAITING_ACTIVITY,
                floor.thread_id,
                result_type=list[str],
                start_to_close_timeout=timedelta(seconds=30),
            )


def activity_spans(history: Any) -> list[float]:
    """Each activity's seconds from started to completed, as the bench reads a step's."""
    started: dict[int, Any] = {}
    spans = []
    for event in history.events:
        kind = event.WhichOneof("attributes")
        if kind == "activity_task_started_event_attributes":
            started[event.activity_task_started_event_attributes.scheduled_event_id] = event
        elif kind == "activity_task_completed_event_attributes":
            attrs = event.activity_task_completed_event_attributes
            begun = started[attrs.scheduled_event_id].event_time.ToDatetime()
            spans.append((event.event_time.ToDatetime() - begun).total_seconds())
    return spans


class Floor:
    """`FerryFloor` runs on the Ferry worker's task queue; `measure` times its activities."""

    def __init__(self, client: Any, ferry_queue: str) -> None:
        self._client, self._ferry_queue = client, ferry_queue
        self.spans: list[float] = []

    async def measure(self, thread_id: str, activities: int) -> None:
        """Run `activities` of Ferry's smallest activity on the thread, one after another."""
        handle = await self._client.start_workflow(
            "FerryFloor",
            FloorInput(thread_id, activities),
            id=f"bench-floor-{uuid.uuid4()}",
            task_queue=self._ferry_queue,
        )
        await handle.result()
        self.spans.extend(activity_spans(await handle.fetch_history()))

    def median_ms(self) -> float:
        return statistics.median(self.spans) * 1000 if self.spans else 0.0
