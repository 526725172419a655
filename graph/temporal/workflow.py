"""The turn as a Temporal workflow: deterministic decisions over the steps' summaries.

Everything here replays: no I/O, no wall clock but `workflow.now()`, no randomness, no import of
LangChain or of Ferry's graph (shapes.py is plain dataclasses). A change to the order or the
options of the activities it schedules breaks replay of recorded histories, which the tests'
`Replayer` catches (tests/temporal/test_replay.py, over histories recorded in
tests/temporal/histories/).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():  # plain checks and dataclasses: no I/O, no state
    from graph.temporal.admission import TURN_REFUSED, TurnRefused, turn_input
    from graph.temporal.shapes import (
        AWAITING_ACTIVITY,
        DECIDE_UPDATE,
        END,
        PROGRESS_UPDATE,
        SET_ASIDE_UPDATE,
        STEP_ACTIVITY,
        WORKFLOW_NAME,
        Progress,
        StepInput,
        StepSummary,
        TurnInput,
    )

STEP_RETRIES = RetryPolicy(
    initial_interval=timedelta(seconds=0.5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=8),
    # What a retry cannot mend: a setting, a refused key or request, a reply cut short twice,
    # a write Ferry refuses. The turn fails with the error's one line, as in-process.
    non_retryable_error_types=[
        "ConfigError",
        "ReplyCutShort",
        "UnreleasedCallError",
        "ClientWriteError",
        "ClientCommandError",
        "ClientToolResultError",
        "ValueError",
        "AuthenticationError",
        "PermissionDeniedError",
        "NotFoundError",
        "BadRequestError",
    ],
)
"""Ferry's backoff (tools/http.py: 0.5 s doubling, at most 8 s), while the turn has time.

Every step may be retried: a model step stores nothing until the reply is whole, a tool step
replays finished calls from their saved writes, and a `retry_safe=False` call that had started
is answered from its start record, never run again (graph/execution.py).
"""
STEP_MARGIN_S = 60.0
"""How long past the turn's time left a step may take: a guard then ends the turn in words."""
LOOK_ELSEWHERE_S = (2.0, 600.0)
"""While a turn waits for a decision it reads the stored thread after 2 s, then twice as long
each time up to 10 min (a week's wait is ~1,000 reads): a pause decided elsewhere — Studio's
resume, or Python's, runs the thread in-process — ends the turn instead of leaving it waiting.
"""


def _refused(exc: BaseException) -> bool:
    """Whether the turn was refused: by the workflow, or by a step on its worker's settings."""
    cause = exc.cause if isinstance(exc, ActivityError) else exc
    return isinstance(cause, ApplicationError) and cause.type == TURN_REFUSED


@workflow.defn(name=WORKFLOW_NAME)
class FerryTurn:
    """One turn of one thread, to its answer, a guard's stop, or a person's decision."""

    def __init__(self) -> None:
        self._output: list[dict[str, str]] = []
        self._state = "running"
        self._report: dict[str, Any] | None = None
        self._pending: list[dict[str, Any]] = []
        self._decision: dict[str, Any] | None = None
        self._set_aside = False

    @workflow.run
    async def run(self, sent: Any = None) -> dict[str, Any]:
        """Run the turn's steps until it stops; `ask --json`'s object.

        `sent` is the `TurnInput` a client sent, decoded as plain JSON: a field of the wrong
        type then fails the workflow in words (admission.py) instead of failing its task on
        decoding, which Temporal would retry forever.
        """
        try:
            return await self._run(turn_input(sent, workflow.info().workflow_id))
        except (TurnRefused, ActivityError) as exc:
            if not _refused(exc):
                raise
            # A watcher's `progress` waits for the turn to stop: it ends now, and the watcher
            # reads the refusal from the failed workflow.
            self._state = "done"
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise

    async def _run(self, turn: TurnInput) -> dict[str, Any]:
        """Run the steps of a turn whose input was taken."""
        deadline = workflow.now() + timedelta(seconds=turn.time_budget_s)
        step = StepInput(
            thread_id=turn.thread_id,
            seconds_left=turn.time_budget_s,
            question=turn.question,
            message_id=turn.message_id,
            decision=turn.decision,
            model=turn.model,
            stream=turn.stream,
            response_format=turn.response_format,
        )
        while True:
            left = max((deadline - workflow.now()).total_seconds(), 0.0)
            step.seconds_left = left
            summary = await workflow.execute_activity(
                STEP_ACTIVITY,
                step,
                result_type=StepSummary,
                start_to_close_timeout=timedelta(seconds=left + STEP_MARGIN_S),
                schedule_to_close_timeout=timedelta(seconds=left + STEP_MARGIN_S),
                # A step silent this long is on a dead worker and runs on another.
                heartbeat_timeout=timedelta(seconds=turn.heartbeat_s),
                retry_policy=STEP_RETRIES,
                # Cancelled (`ferry cancel`), the turn closes once its step has stopped and
                # released the thread, not while the step still runs and holds it.
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            self._output.extend(summary.output)
            since = summary.since  # found by the turn's first step; kept for its others
            if summary.pending_approvals:
                decision = await self._await_decision(turn.thread_id, summary)
                if decision is None:  # a new question came: it answers the calls undecided
                    break
                # The decision starts a new invocation with its own budget, as `ferry resume
                # --approve` does in-process: the wait for a person is not the run's time.
                deadline = workflow.now() + timedelta(seconds=turn.time_budget_s)
                step = StepInput(
                    turn.thread_id,
                    0.0,
                    decision=decision,
                    model=turn.model,
                    stream=turn.stream,
                    response_format=turn.response_format,
                    since=summary.checkpoint,  # the resumed invocation reports its own calls
                )
                continue
            if summary.next == END:
                self._finish(turn.thread_id, summary, "done")
                break
            if workflow.cancellation_reason() is not None:
                # `ferry cancel` came while the step ended on its own, before its worker heard:
                # the step's result is kept and the turn stops here, as cancelled.
                raise asyncio.CancelledError
            step = StepInput(
                turn.thread_id,
                0.0,
                model=turn.model,
                stream=turn.stream,
                response_format=turn.response_format,
                since=since,
            )
        await workflow.wait_condition(workflow.all_handlers_finished)
        assert self._report is not None
        return self._report

    def _finish(self, thread_id: str, summary: StepSummary, state: str) -> None:
        # The invocation's report as the step read it from the thread: every runner's report.
        self._report, self._state = {**summary.report, "thread_id": thread_id}, state

    async def _await_decision(self, thread_id: str, summary: StepSummary) -> dict[str, Any] | None:
        """Report the pause, then wait for `decide` (`ferry resume --approve` or `--reject`).

        None when the turn is set aside instead (a new question on the thread).
        """
        self._pending = summary.pending_approvals
        self._finish(thread_id, summary, "awaiting_approval")
        wait_s = LOOK_ELSEWHERE_S[0]
        while True:
            try:
                await workflow.wait_condition(
                    lambda: self._decision is not None or self._set_aside,
                    timeout=timedelta(seconds=wait_s),
                )
                break
            except TimeoutError:
                if await self._decided_elsewhere(thread_id):
                    self._set_aside = True
                    break
                wait_s = min(wait_s * 2, LOOK_ELSEWHERE_S[1])
        if self._set_aside:
            self._state = "done"
            return None
        decision, self._decision, self._pending = self._decision, None, []
        # The resumed invocation reports its own calls, usage and output, as in-process: a
        # client watching it after the decision is shown what follows, not the lines again.
        self._output = []
        self._state, self._report = "running", None
        assert decision is not None
        return decision

    async def _decided_elsewhere(self, thread_id: str) -> bool:
        """Whether none of the calls this turn holds awaits approval on the stored thread."""
        try:
            awaiting: list[str] = await workflow.execute_activity(
                AWAITING_ACTIVITY,
                thread_id,
                result_type=list[str],
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError:  # no worker could read the thread: look again later
            return False
        held = {call.get("id") for call in self._pending}
        return self._decision is None and not held & set(awaiting)

    # A turn cancelled or failed closes with its watchers' updates still waiting: each watcher
    # then reads the outcome from the closed workflow (client.py), so the SDK's warning about
    # them (TMPRL1102, on the worker's stderr at every `ferry cancel`) says nothing of use.
    @workflow.update(
        name=PROGRESS_UPDATE, unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON
    )
    async def progress(self, seen: int) -> Progress:
        """The output after its first `seen` items, once there is some or the turn stops or pauses.

        A negative `seen` asks for no output: the answer, once the turn stops or pauses.
        """
        await workflow.wait_condition(
            lambda: len(self._output) > seen >= 0 or self._state != "running"
        )
        output = self._output[seen:] if seen >= 0 else []
        return Progress(output=output, state=self._state, report=self._report)

    @workflow.update(name=DECIDE_UPDATE)
    def decide(self, decision: dict[str, Any]) -> list[dict[str, Any]]:
        """Decide the calls awaiting approval (a `{"decisions": [...]}` resume value)."""
        pending = self._pending
        self._decision = decision
        return pending

    @decide.validator
    def _decide_only_when_paused(self, decision: dict[str, Any]) -> None:
        if not self._pending or self._decision is not None or self._set_aside:
            raise ValueError("no tool calls are awaiting approval on this thread")

    @workflow.update(name=SET_ASIDE_UPDATE)
    def set_aside(self) -> None:
        """End the turn where it waits for approval: a new question goes on from there."""
        self._set_aside = True

    @set_aside.validator
    def _set_aside_only_when_paused(self) -> None:
        if not self._pending or self._decision is not None:
            raise ValueError("the thread's turn is running, not awaiting approval")
