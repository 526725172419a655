"""Temporal's own cost of one activity on a Ferry worker: the floor under every step.

bench/temporal_scale.py reads a step's time from the turn's history, from its activity's
`ActivityTaskStarted` to its `ActivityTaskCompleted`. That span holds more than the step: the
task's way from the server to the worker's Python code, and the result's way back, which no
step can shorten. A turn's steps are dispatched eagerly: the worker that completes the
workflow task which schedules a step gets the step in the server's reply, and the server
stamps the step started as it takes that completion, before it has stored it and replied. So
the span also holds the end of the workflow task's round trip (~1 ms more than an activity a
worker polls for, timed at its handler; bench/README.md, "A Temporal step's own work"), and
the first step's the most: its workflow task also takes the update by which the client
watches the turn (`watch`).

This module's workflow, served by the bench's Ferry worker beside `FerryTurn`
(bench/temporal_worker.py) on its task queue and watched as a turn is (an update that waits
for its end), schedules Ferry's smallest activity (`ferry_awaiting`: one read of a stored
thread) a turn's worth of times: each dispatched as a step is, by the same worker. The same
span of each, averaged over the turn's activities as the steps' time is, is the floor.
Measured between the timed turns, on the same thread, the machine's load weighs on both alike.
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
    def __init__(self) -> None:
        self._done = False

    @workflow.run
    async def run(self, floor: FloorInput) -> None:
        for _ in range(floor.activities):
            await workflow.execute_activity(
                AWAITING_ACTIVITY,
                floor.thread_id,
                result_type=list[str],
                start_to_close_timeout=timedelta(seconds=30),
            )
        self._done = True
        await workflow.wait_condition(workflow.all_handlers_finished)

    @workflow.update(name="done")
    async def done(self) -> None:
        await workflow.wait_condition(lambda: self._done)


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
        self.spans: list[list[float]] = []
        """Each measured workflow's activity spans, in order."""

    async def measure(self, thread_id: str, activities: int) -> None:
        """Run `activities` of Ferry's smallest activity on the thread, one after another."""
        handle = await self._client.start_workflow(
            "FerryFloor",
            FloorInput(thread_id, activities),
            id=f"bench-floor-{uuid.uuid4()}",
            task_queue=self._ferry_queue,
        )
        await handle.execute_update("done")  # as `watch` follows a turn
        await handle.result()
        self.spans.append(activity_spans(await handle.fetch_history()))

    def median_ms(self) -> float:
        """An activity's span: the mean over a turn's activities of each one's median.

        The first costs more (its workflow task also takes the watch's update), as a turn's
        first step does: a median of all spans would land on either side of the gap.
        """
        if not self.spans:
            return 0.0
        medians = [statistics.median(at) for at in zip(*self.spans, strict=True)]
        return float(statistics.mean(medians)) * 1000
