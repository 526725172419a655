"""`TemporalRunner`: a thread's turns run on Temporal's workers, used exactly as in-process.

The turn runs on whichever `ferry worker` takes it (graph/temporal/workflow.py); this runner
starts it, decides its pauses, and turns what `watch` reports into the events of
graph/runs/runner.py, the same the in-process runner shows: progress lines as the workers
report them, the reply's tokens as its step heartbeats them (each piece once), and the report
the turn computed from what it stored. A client that leaves (Ctrl-C, a kill) leaves the turn
running; `attach` watches it again and `cancel` stops it.

Its Temporal work runs on one event loop and a runtime of its own, dropped by `close`: the
SDK's process-wide runtime outlives the interpreter's shutdown, and its threads then sometimes
abort the process (temporalio/sdk-python#300: "PyGILState_Release", exit 134 after the answer
was printed). A runtime released while Python still runs does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Coroutine, Generator, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from graph.runs.report import answer_of, pending_approvals_of
from graph.runs.runner import (
    Cancelled,
    Event,
    Finished,
    Line,
    Paused,
    Started,
    Token,
    resumed_calls,
)
from graph.temporal.client import (
    DEFAULT_ADDRESS,
    TemporalUnreachable,
    TurnRunning,
    WaitForServer,
    cancel,
    connect,
    decide,
    quiet_runtime,
    running_turn,
    server_away,
    start_turn,
    watch,
)

if TYPE_CHECKING:
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig
    from temporalio.client import Client, WorkflowHandle

    from graph.builder import FerryGraph
    from graph.core.settings import Settings

T = TypeVar("T")


def _nothing() -> None:
    """Do nothing."""


class TemporalRunner:
    """Runs a thread's turns on Temporal; a context manager that drops its runtime on exit.

    `graph` reads the stored threads (it runs no turn). `stream`: the workers heartbeat the
    reply's tokens as they come (only worth it when they are shown). `wait`: a turn on a busy
    thread waits for the running one to end instead of failing. `say` is handed the lines said
    beside a turn (the server is away; waiting for the thread); `on_stopped` is called once a
    turn has stopped and its outcome is stored, before it is shown.
    """

    leaves_turn_running = True

    def __init__(
        self,
        settings: Settings,
        graph: FerryGraph,
        *,
        stream: bool = False,
        wait: bool = False,
        say: Callable[[str], None] = lambda line: None,
        on_stopped: Callable[[], None] = _nothing,
    ) -> None:
        self.settings, self.graph = settings, graph
        self.stream, self.wait, self.say, self.on_stopped = stream, wait, say, on_stopped
        self._loop = asyncio.Runner()
        self._runtime = quiet_runtime()
        self._client: Client | None = None
        self._turns: list[Generator[Event, None, None]] = []
        # Threads whose turn a client left running (Ctrl-C in chat): the next waits for it.
        self._left: set[str] = set()
        self._watched: set[str] = set()  # threads whose turn this runner showed

    def __enter__(self) -> TemporalRunner:  # noqa: D105 - a context manager
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the turns' event streams and the loop; drop the runtime."""
        while exc is not None:  # its frames hold the client, and the client its runtime
            exc.__traceback__ = None
            exc = exc.__cause__ or exc.__context__
        for turn in self._turns:
            turn.close()
        self._turns.clear()
        self._client = None
        self._loop.close()
        del self._runtime
        gc.collect()

    def start(
        self, thread_id: str, question: HumanMessage | None, schema: str | None = None
    ) -> Iterator[Event]:
        """Start the thread's turn: a question, or (None) its unfinished run continued."""
        text = None if question is None else str(question.text)
        announce = False if question is None else None  # a resume shows the calls it runs
        return self._turn(thread_id, lambda: self._started(thread_id, text, schema), announce)

    def attach(self, thread_id: str) -> Iterator[Event] | None:
        """Watch the thread's turn running on Temporal now, or None if none runs."""
        handle = self._call(lambda client: running_turn(client, thread_id))
        if handle is None:
            return None

        async def running() -> WorkflowHandle[Any, Any]:
            return handle

        return self._turn(thread_id, running)

    def decide(
        self, thread_id: str, decision: dict[str, Any], schema: str | None = None
    ) -> Iterator[Event]:
        """Decide the turn waiting on Temporal; one that paused elsewhere continues with it."""

        async def decided() -> WorkflowHandle[Any, Any]:
            client = await self._connected()
            handle = await decide(client, thread_id, decision)
            if handle is None:  # paused in-process, or its Temporal run was cancelled
                handle = await self._started(thread_id, None, schema, decision=decision)
            return handle

        first = thread_id not in self._watched  # else its calls were shown when asked for
        return self._turn(thread_id, decided, True if first else None)

    def last_turn(self, thread_id: str, state: Any) -> Iterator[Event] | None:
        """The end of the thread's last Temporal turn, if the thread ends with its answer.

        A client that left (Ctrl-C, killed) while its turn went on finds the answer here.
        """
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.service import RPCError, RPCStatusCode

        from graph.temporal.shapes import ordered_report, workflow_id

        async def last(client: Client) -> dict[str, Any] | None:
            handle = client.get_workflow_handle(workflow_id(thread_id))
            try:
                described = await handle.describe()
            except RPCError as exc:
                if exc.status == RPCStatusCode.NOT_FOUND:  # the thread never ran on Temporal
                    return None
                raise
            if described.status != WorkflowExecutionStatus.COMPLETED:
                return None
            report: dict[str, Any] = await handle.result()
            return report

        report = self._call(last)
        messages = (getattr(state, "values", None) or {}).get("messages") or []
        if report is None or report.get("answer") != answer_of(messages):
            return None  # the thread went on since
        answer = str(report.get("answer") or "")
        ended: list[Event] = [Started(), Token("answer", answer), Finished(ordered_report(report))]
        return iter(ended)

    def cancel(self, thread_id: str) -> Cancelled:
        """Cancel the thread's turn on Temporal and wait until it stopped; how it stopped."""
        return self._call(lambda client: cancel(client, thread_id))

    async def _connected(self) -> Client:
        if self._client is None:
            self._client = await connect(self.settings, runtime=self._runtime)
        return self._client

    async def _started(
        self,
        thread_id: str,
        question: str | None,
        schema: str | None,
        decision: dict[str, Any] | None = None,
    ) -> WorkflowHandle[Any, Any]:
        """Start the turn; when waiting, after the turn running on the thread ends."""
        client = await self._connected()
        while True:
            try:
                return await start_turn(
                    client,
                    thread_id,
                    question,
                    decision=decision,
                    model=self.settings.model,
                    stream=self.stream,
                    response_format=schema,
                    settings=self.settings,
                )
            except TurnRunning:
                running = await running_turn(client, thread_id)
                if not (self.wait or thread_id in self._left) or running is None:
                    raise
                self.say(f"thread {thread_id} is busy on Temporal; waiting for its turn to end")
                with contextlib.suppress(Exception):  # however it ended, the thread is free
                    await running.result()

    def _turn(
        self,
        thread_id: str,
        handle_of: Callable[[], Coroutine[Any, Any, WorkflowHandle[Any, Any]]],
        announce: bool | None = None,
    ) -> Iterator[Event]:
        """The events of the turn `handle_of()` starts or finds.

        `announce`: show the calls it is about to run first, as in-process (True: with a
        decision; False: without one; None: not at all).
        """
        turn = self._events(thread_id, handle_of, announce)
        self._turns.append(turn)
        return turn

    def _events(
        self,
        thread_id: str,
        handle_of: Callable[[], Coroutine[Any, Any, WorkflowHandle[Any, Any]]],
        announce: bool | None,
    ) -> Generator[Event, None, None]:
        before = None if announce is None else self.graph.get_state(_config(thread_id))
        handle = self._run(handle_of())
        self._left.discard(thread_id)
        self._watched.add(thread_id)
        yield Started()
        if before is not None:
            yield from resumed_calls(before, decided=bool(announce))
        queue: asyncio.Queue[Event] = asyncio.Queue()
        replies = _Replies(queue.put_nowait)
        wait = WaitForServer.of(self.settings, self.say)

        def on_line(line: str) -> None:
            queue.put_nowait(Line(line))

        async def watching() -> dict[str, Any]:
            return await watch(handle, on_line, replies.text, wait)

        task = self._run(_spawn(watching()))
        try:
            while (event := self._run(_next(queue, task))) is not None:
                yield event
            report = self._result(task)
        except KeyboardInterrupt:
            self._left.add(thread_id)  # the turn goes on without its client
            raise
        finally:
            if not task.done():
                self._loop.run(_cancelled(task))
        self.on_stopped()
        answer = report.get("answer") or ""
        if answer and not replies.printed(answer):  # its tokens were not all seen
            yield Token("answer", answer)
        pending = pending_approvals_of(self.graph.get_state(_config(thread_id)))
        yield Paused(report, pending) if report.get("pending_approvals") else Finished(report)

    def _call(self, request: Callable[[Client], Coroutine[Any, Any, T]]) -> T:
        async def call() -> T:
            return await request(await self._connected())

        return self._run(call())

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on this runner's loop; a server away is one line naming it."""
        try:
            return self._loop.run(coroutine)
        except Exception as exc:
            raise self._unreachable(exc) or exc from None

    def _result(self, task: asyncio.Task[dict[str, Any]]) -> dict[str, Any]:
        try:
            return task.result()
        except Exception as exc:
            raise self._unreachable(exc) or exc from None

    def _unreachable(self, exc: BaseException) -> TemporalUnreachable | None:
        if not server_away(exc):
            return None
        address = self.settings.temporal_address or DEFAULT_ADDRESS
        return TemporalUnreachable(
            f"Temporal at {address} is unreachable (FERRY_TEMPORAL_ADDRESS): "
            f"{getattr(exc, 'message', '') or 'no answer'}"
        )


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


class _Replies:
    """A turn's model replies as tokens, each piece of text once.

    A reply's text comes as it grows (the running step's heartbeats) and whole when its step
    ends, so what was handed on is kept by reply: only text beyond it becomes a token.
    """

    def __init__(self, put: Callable[[Event], None]) -> None:
        self._put = put
        self._shown: dict[str, str] = {}
        self._last = ""

    def text(self, reply_id: str, text: str) -> None:
        """A reply's text so far: what was not handed on yet of it is."""
        shown = self._shown.get(reply_id, "")
        if len(text) <= len(shown) or not text.startswith(shown):
            return  # nothing new: a heartbeat read after its step's whole text
        self._last = reply_id
        self._put(Token(reply_id, text[len(shown) :]))
        self._shown[reply_id] = text

    def printed(self, answer: str) -> bool:
        """Whether the last reply handed on is `answer`."""
        return self._shown.get(self._last) == answer


async def _spawn(coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    return asyncio.create_task(coroutine)


async def _next(queue: asyncio.Queue[Event], task: asyncio.Task[Any]) -> Event | None:
    """The next event the watch reported, or None once it ended and all were taken."""
    if queue.empty() and not task.done():
        getter = asyncio.ensure_future(queue.get())
        await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            return getter.result()
        getter.cancel()
    return None if queue.empty() else queue.get_nowait()


async def _cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
