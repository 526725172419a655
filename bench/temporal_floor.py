"""Temporal's own cost of one activity on a Ferry worker: the floor under every step.

bench/temporal_scale.py reads a step's time from the turn's history, from its activity's
`ActivityTaskStarted` to its `ActivityTaskCompleted`. That span holds more than the step: the
task's way from the server to the worker's Python code, and the result's way back, which no
step can shorten. A workflow of this module's, run by a worker in the bench's process on a
task queue of its own, schedules Ferry's smallest activity (`ferry_awaiting`: one read of a
stored thread) on the Ferry worker's queue, a turn's worth of times; the same span of each is
the floor. Measured between the timed turns, on the same thread, the machine's load weighs on
both alike.
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from graph.temporal.shapes import AWAITING_ACTIVITY  # plain names and dataclasses, as workflow.py


@dataclass
class FloorInput:
    thread_id: str
    task_queue: str
    activities: int


@workflow.defn(name="FerryFloor")
class FerryFloor:
    @workflow.run
    async def run(self, floor: FloorInput) -> None:
        for _ in range(floor.activities):
            await workflow.execute_activity(
                AWAITING_ACTIVITY,
                floor.thread_id,
                task_queue=floor.task_queue,
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
    """A worker for `FerryFloor` in this process, while the block runs; `measure` times it."""

    def __init__(self, client: Any, ferry_queue: str) -> None:
        self._client, self._ferry_queue = client, ferry_queue
        self._own_queue = f"bench-floor-{uuid.uuid4()}"
        self._worker = Worker(
            client,
            task_queue=self._own_queue,
            workflows=[FerryFloor],
            # The workflow's own cost is not measured; only its activities' spans are.
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        self.spans: list[float] = []

    async def __aenter__(self) -> Floor:
        await self._worker.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._worker.__aexit__(*exc)

    async def measure(self, thread_id: str, activities: int) -> None:
        """Run `activities` of Ferry's smallest activity on the thread, one after another."""
        handle = await self._client.start_workflow(
            "FerryFloor",
            FloorInput(thread_id, self._ferry_queue, activities),
            id=f"bench-floor-{uuid.uuid4()}",
            task_queue=self._own_queue,
        )
        await handle.result()
        self.spans.extend(activity_spans(await handle.fetch_history()))

    def median_ms(self) -> float:
        return statistics.median(self.spans) * 1000 if self.spans else 0.0
