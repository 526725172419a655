"""Handing turns to Temporal from Python or the CLI: start, watch, decide, re-attach, cancel.

client = await connect(get_settings())
report = await run_turn(client, thread_id, "What is 150 * 3?")  # `ask --json`'s object
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    TerminatedError,
    WorkflowAlreadyStartedError,
)
from temporalio.exceptions import TimeoutError as RunTimedOut
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import RetryConfig, RPCError, RPCStatusCode

from graph.core.settings import Settings, get_settings
from graph.runs.errors import RunFailed, ServerUnreachable
from graph.temporal.admission import TURN_REFUSED
from graph.temporal.shapes import (
    DECIDE_UPDATE,
    PROGRESS_UPDATE,
    SET_ASIDE_UPDATE,
    WORKFLOW_NAME,
    Progress,
    TurnInput,
    ordered_report,
    workflow_id,
)
from graph.threads.lease import ThreadBusy

if TYPE_CHECKING:
    from graph.runs.runner import Cancelled

DEFAULT_ADDRESS = "localhost:7233"
TOKENS_EVERY_S = 0.2
"""How often a watcher of the answer's tokens reads the running step's latest heartbeat."""
OnText = Callable[[str, str], None]
"""Handed a model reply's id and its text so far, each time it has grown."""
RETRY_EVERY_S = (0.5, 5.0)
"""A watcher whose server is away asks again after 0.5 s, then twice as long, at most 5 s."""
T = TypeVar("T")


class TurnRunning(ThreadBusy):
    """A Temporal run already holds the thread: one turn per thread, by workflow id."""

    def __init__(self, thread_id: str) -> None:  # noqa: D107 - the message says it
        RuntimeError.__init__(
            self,
            f"thread {thread_id} is busy: a Temporal run holds it (workflow "
            f"{workflow_id(thread_id)}); see it with: ferry resume --thread {thread_id}",
        )


class TurnFailed(RunFailed):
    """The turn's workflow failed, or was cancelled (`ferry cancel`) or terminated."""


class TemporalUnreachable(ServerUnreachable):
    """No Temporal server answers at the address (at first, or for longer than the wait)."""


def thread_of(handle: WorkflowHandle[Any, Any]) -> str:
    """The thread a turn's workflow runs (its id is `workflow_id(thread)`)."""
    return handle.id.removeprefix(workflow_id(""))


def server_away(exc: BaseException) -> bool:
    """Whether a call failed because no Temporal server answered (FERRY_TEMPORAL_RETRY_S long)."""
    return isinstance(exc, RPCError) and exc.status == RPCStatusCode.UNAVAILABLE


@dataclass
class WaitForServer:
    """How a watcher rides out a Temporal server that is away: the turn goes on without it.

    A call that finds the server away is made again until it answers; `on_away` is handed one
    line when the server goes away, and after `wait_s` of absence `TemporalUnreachable` ends
    the wait with a line naming the address and `ferry resume --thread ID`.
    """

    address: str
    wait_s: float
    on_away: Callable[[str], None] = lambda line: None

    @classmethod
    def of(cls, settings: Settings, on_away: Callable[[str], None] | None = None) -> WaitForServer:
        """The wait the settings ask for (FERRY_TEMPORAL_ADDRESS, FERRY_TEMPORAL_WAIT_S)."""
        address = settings.temporal_address or DEFAULT_ADDRESS
        return cls(address, settings.temporal_wait_s, on_away or (lambda line: None))

    async def call(self, request: Callable[[], Awaitable[T]], thread_id: str) -> T:
        """`request()`'s result, once the server answers it.

        Raises:
            TemporalUnreachable: the server stayed away longer than `wait_s`.
        """
        away_since: float | None = None
        pause = RETRY_EVERY_S[0]
        while True:
            try:
                return await request()
            except RPCError as exc:
                if not server_away(exc):
                    raise
                now = time.monotonic()
                if away_since is None:
                    away_since = now
                    self.on_away(
                        f"Temporal at {self.address} is unreachable; the turn goes on; waiting…"
                    )
                elif now - away_since >= self.wait_s:
                    raise self.gave_up(thread_id) from None
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_EVERY_S[1])

    def gave_up(self, thread_id: str) -> TemporalUnreachable:
        """The error that ends the wait: the address, and how to watch the turn again."""
        return TemporalUnreachable(
            f"Temporal at {self.address} is still unreachable after {self.wait_s:g} s "
            f"(FERRY_TEMPORAL_WAIT_S); the turn may still be running; once the server is back, "
            f"continue with: ferry resume --thread {thread_id}"
        )


def quiet_runtime() -> Runtime:
    """A runtime of the SDK's whose core logs through Python's `temporalio.core` logger.

    The SDK's core writes its own log lines (coloured warnings while a server is away) to
    stdout unless told otherwise: here they go to Python's `temporalio.core` logger, which
    Ferry's logging keeps where logs are kept and never shows on a terminal (graph/core/log.py).
    """
    forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    telemetry = TelemetryConfig(
        logging=LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding
        )
    )
    return Runtime(telemetry=telemetry)


async def connect(
    settings: Settings | None = None, address: str | None = None, runtime: Runtime | None = None
) -> Client:
    """A client of the Temporal frontend; one clear line naming the address if unreachable.

    `runtime`: the SDK's thread pool; by default its process-wide one (see graph/temporal/runner.py
    for why the CLI brings its own). Each call is retried for FERRY_TEMPORAL_RETRY_S while the
    server does not answer; the SDK's other retry settings are its own.

    Raises:
        TemporalUnreachable: no Temporal server answers at the address.
    """
    settings = settings or get_settings()
    target = address or settings.temporal_address or DEFAULT_ADDRESS
    # The time is the only bound: the SDK's default count of retries (10) would cut a long one.
    retry = RetryConfig(
        max_elapsed_time_millis=round(settings.temporal_retry_s * 1000), max_retries=0
    )
    try:
        return await Client.connect(
            target, namespace=settings.temporal_namespace, runtime=runtime, retry_config=retry
        )
    except RuntimeError as exc:  # the core SDK's connection failure
        # Its text nests the transport's errors; the OS's message at the bottom says it best.
        found = re.findall(r'message: \\?"([^"\\]+)', str(exc))
        reason = found[-1] if found else (str(exc).splitlines() or [type(exc).__name__])[0]
        raise TemporalUnreachable(
            f"cannot reach Temporal at {target} (FERRY_TEMPORAL_ADDRESS): {reason}"
        ) from exc


async def start_turn(
    client: Client,
    thread_id: str,
    question: str | None = None,
    *,
    decision: dict[str, Any] | None = None,
    model: str | None = None,
    stream: bool = False,
    response_format: str | None = None,
    settings: Settings | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start the thread's turn on Temporal; `TurnRunning` if one runs there already.

    `stream`: its steps heartbeat the model's reply as it comes, for `watch(on_text=...)`.
    `response_format`: a JSON schema the turn's answer must match (graph/output.py).

    A new question on a thread whose turn waits for approval sets that turn aside, as
    in-process: the calls it held are answered as undecided, and the question goes on.
    """
    settings = settings or get_settings()
    turn = TurnInput(
        thread_id=thread_id,
        time_budget_s=settings.time_budget_s,
        question=question,
        message_id=str(uuid.uuid4()) if question is not None else None,
        decision=decision,
        model=model,
        stream=stream,
        response_format=response_format,
        heartbeat_s=settings.temporal_heartbeat_s,
    )
    for attempt in range(2):
        try:
            return await client.start_workflow(
                WORKFLOW_NAME,
                turn,
                id=workflow_id(thread_id),
                task_queue=settings.temporal_task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            )
        except WorkflowAlreadyStartedError as exc:
            if attempt or question is None or not await _set_aside(client, thread_id):
                raise TurnRunning(thread_id) from exc
    raise AssertionError("unreachable: the second attempt returns or raises")


async def _set_aside(client: Client, thread_id: str) -> bool:
    """End the thread's turn if it waits for approval; whether it did."""
    handle = client.get_workflow_handle(workflow_id(thread_id))
    try:
        await handle.execute_update(SET_ASIDE_UPDATE)
        await handle.result()
    except (RPCError, WorkflowUpdateFailedError, WorkflowFailureError):
        return False
    return True


async def running_turn(client: Client, thread_id: str) -> WorkflowHandle[Any, Any] | None:
    """The thread's turn running on Temporal now, or None."""
    handle = client.get_workflow_handle(workflow_id(thread_id))
    try:
        described = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:  # never started on this namespace
            return None
        raise
    return handle if described.status == WorkflowExecutionStatus.RUNNING else None


async def watch(
    handle: WorkflowHandle[Any, Any],
    on_line: Callable[[str], None] | None = None,
    on_text: OnText | None = None,
    wait: WaitForServer | None = None,
) -> dict[str, Any]:
    """Follow a turn to its stop or its pause for approval; `ask --json`'s object.

    Progress lines go to `on_line` as the workers report them; model replies go to `on_text`
    (the reply's id, its text so far): as their tokens come if the turn was started with
    `stream=True`, and whole once their step ends. Leaving (Ctrl-C, a kill) leaves the turn
    running: `ferry resume --thread ID` watches it again. A server that goes away is waited
    for as `wait` says (by default the settings' FERRY_TEMPORAL_WAIT_S), and watched again.

    Raises:
        TurnFailed: the turn failed, or was cancelled or terminated.
        TemporalUnreachable: the server stayed away longer than the wait.
    """
    wait = wait or WaitForServer.of(get_settings())
    shown = _Shown(on_line, on_text)
    following = asyncio.create_task(_follow_steps(handle, shown)) if on_text else None
    try:
        return await _watch(handle, shown, wait, seen=0 if on_line or on_text else -1)
    finally:
        if following:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following


class _Shown:
    """What a watcher was handed of each step's output, so that nothing is handed twice.

    A running step's items come in its heartbeats, and all of them again once it ends.
    """

    def __init__(self, on_line: Callable[[str], None] | None, on_text: OnText | None) -> None:
        self._on_line, self._on_text = on_line, on_text
        self._counts: dict[str, int] = {}

    def items(self, step: str, items: list[dict[str, str]]) -> None:
        """Hand on the items of `step` beyond those handed on before (`items` is all so far)."""
        start = self._counts.get(step, 0)
        for item in items[start:]:
            if not isinstance(item, dict):  # a heartbeat is read as sent; a worker's, unchecked
                continue
            if "line" in item and self._on_line:
                self._on_line(str(item["line"]))
            elif "reply" in item and self._on_text:
                self._on_text(str(item["reply"]), str(item.get("text", "")))
        self._counts[step] = max(start, len(items))

    def text(self, reply_id: str, text: str) -> None:
        """The reply a running step's model is writing, so far."""
        if self._on_text and text:
            self._on_text(reply_id, text)


async def _watch(
    handle: WorkflowHandle[Any, Any], shown: _Shown, wait: WaitForServer, seen: int
) -> dict[str, Any]:
    """Follow the turn's `progress` from item `seen` (negative: only its outcome)."""
    thread_id = thread_of(handle)
    while True:
        try:
            progress = await handle.execute_update(PROGRESS_UPDATE, seen, result_type=Progress)
        except (RPCError, WorkflowUpdateFailedError):
            # The workflow closed meanwhile, or the server went away: ask it, once it answers.
            described = await wait.call(handle.describe, thread_id)
            if described.status != WorkflowExecutionStatus.RUNNING:
                return await _result(handle, wait)
            await asyncio.sleep(RETRY_EVERY_S[0])  # re-attach: the turn went on meanwhile
            continue
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # Ctrl-C: leave as cancelled, quietly
                raise asyncio.CancelledError from None
            continue  # the long poll timed out: the turn is still running, ask again
        steps: dict[str, list[dict[str, str]]] = {}
        for item in progress.output:  # each ended step's items, all of them
            steps.setdefault(item.get("step", ""), []).append(item)
        for step, items in steps.items():
            shown.items(step, items)
        seen += len(progress.output)
        if progress.state == "done":
            # The answer is known before the workflow closes: waiting for it to close lets
            # the next turn on the thread start at once (one workflow per thread at a time).
            return await _result(handle, wait)
        if progress.state != "running" and progress.report is not None:
            return ordered_report(progress.report)


async def _follow_steps(handle: WorkflowHandle[Any, Any], shown: _Shown) -> None:
    """Hand on the running step's output and reply so far, from its latest heartbeat.

    The tokens never enter the turn's history: a step heartbeats what it has shown
    (graph/temporal/worker.py), and Temporal keeps only a running activity's last heartbeat.
    """
    convert = DataConverter.default.payload_converter
    while True:
        await asyncio.sleep(TOKENS_EVERY_S)
        try:
            described = await handle.describe()
        except RPCError:
            continue  # the server is briefly away: the step's summary still brings the text
        for running in described.raw_description.pending_activities:
            payloads = list(running.heartbeat_details.payloads)
            beat = convert.from_payloads(payloads)[0] if payloads else None
            if isinstance(beat, dict) and "step" in beat:
                shown.items(str(beat["step"]), list(beat.get("output") or []))
                shown.text(str(beat.get("reply", "")), str(beat.get("text", "")))


async def _result(handle: WorkflowHandle[Any, Any], wait: WaitForServer) -> dict[str, Any]:
    thread_id = thread_of(handle)
    try:
        result = await wait.call(handle.result, thread_id)
    except WorkflowFailureError as exc:
        raise TurnFailed(_ended(exc, thread_id)) from exc
    return ordered_report(result)


def _ended(exc: WorkflowFailureError, thread_id: str) -> str:
    """Why a turn's workflow ended without an answer, in one line of words."""
    cause: BaseException = exc
    while getattr(cause, "cause", None) is not None:
        cause = cause.cause  # type: ignore[attr-defined]  # Temporal's failures chain by `cause`
    again = f"continue it with: ferry resume --thread {thread_id}"
    if isinstance(cause, CancelledError):
        return f"thread {thread_id}: its turn on Temporal was cancelled (ferry cancel); {again}"
    if isinstance(cause, TerminatedError):
        return f"thread {thread_id}: its turn on Temporal was terminated; {again}"
    if isinstance(cause, RunTimedOut):
        return f"thread {thread_id}: its turn on Temporal timed out; {again}"
    # Ferry's own failures (a refusal, a setting) carry their one line as the message.
    message = str(getattr(cause, "message", None) or cause).strip()
    text = message.splitlines()[0] if message else "no reason was given"
    if isinstance(cause, ApplicationError) and cause.type == TURN_REFUSED:
        text = f"the worker refused it: {text}"
    return f"the Temporal run of {workflow_id(thread_id)} ended without an answer: {text}"


async def run_turn(
    client: Client,
    thread_id: str,
    question: str,
    *,
    model: str | None = None,
    settings: Settings | None = None,
    on_line: Callable[[str], None] | None = None,
    on_text: OnText | None = None,
) -> dict[str, Any]:
    """Ask `question` on the thread through Temporal; what `ferry ask --json` prints.

    `on_line` is handed each progress line (`→ lookup(key="k")`, `✓ lookup 3 ms`) as it comes;
    `on_text` each model reply's id and text so far, as its tokens come.
    """
    handle = await start_turn(
        client, thread_id, question, model=model, stream=on_text is not None, settings=settings
    )
    return await watch(handle, on_line, on_text, WaitForServer.of(settings or get_settings()))


async def decide(
    client: Client, thread_id: str, decision: dict[str, Any]
) -> WorkflowHandle[Any, Any] | None:
    """Send a decision to the thread's turn waiting on Temporal; None if none waits."""
    handle = await running_turn(client, thread_id)
    if handle is None:
        return None
    try:
        await handle.execute_update(DECIDE_UPDATE, decision)
    except WorkflowUpdateFailedError:  # the validator's: nothing awaits approval
        return None
    return handle


async def cancel(client: Client, thread_id: str) -> Cancelled:
    """Cancel the thread's turn on Temporal and wait until it stopped; how it stopped.

    The workflow waits for its running step to stop (after its running node) before it closes,
    so once this returns no worker runs the turn and the thread's lease is free. A turn whose
    last step was ending anyway ends with its answer instead: "ended", not "cancelled".
    None when no turn was running.
    """
    handle = await running_turn(client, thread_id)
    if handle is None:
        return None
    await handle.cancel()
    try:
        await handle.result()
    except WorkflowFailureError:  # cancelled, the outcome asked for
        return "cancelled"
    return "ended"
