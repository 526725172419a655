"""`ferry worker`: a Temporal worker that runs Ferry's turns, as many as you start, anywhere.

Each worker builds Ferry's graph once on the configured database (`FERRY_DB`, or
`FERRY_DATABASE_URL` for workers on several hosts) and serves the `FerryTurn` workflow and its
one activity, a step of the graph (graph/temporal/steps.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Collection, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic_settings import BaseSettings, SettingsConfigDict
from temporalio import activity
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from graph.core.settings import ConfigError, Settings
from graph.runs.report import pending_approvals_of
from graph.temporal.admission import (
    MAX_TIME_BUDGET_S,
    TurnRefused,
    check_model_spec,
    check_step,
)
from graph.temporal.shapes import AWAITING_ACTIVITY, STEP_ACTIVITY, StepInput, StepSummary
from graph.temporal.steps import StepOutput, advance, step_config
from graph.temporal.workflow import FerryTurn

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from graph.builder import FerryGraph

BEAT_S = 2.0
"""How often a step heartbeats, or a fifth of its heartbeat timeout if that is shorter."""
TOKENS_EVERY_S = 0.2
"""How often a step whose reply is watched heartbeats the reply so far (`ferry ask` streams it)."""
WORKFLOW_RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("graph", "tools")
)
"""The workflow's sandbox takes Ferry's modules from the worker, not re-imported per run.

The workflow module is imported from inside the `graph` package, whose parents import Ferry's
settings and client; the workflow code itself uses only graph/temporal/shapes.py and the checks
of graph/temporal/admission.py.
"""
MAX_STEPS = 64
"""Steps one worker runs at once: the work is waiting on models and tools, not the CPU."""
GRAPHS_CACHED = 8
"""Graphs a worker keeps built for models other than its own; the least recently used goes."""


class WorkerModels(BaseSettings):
    """The models a worker runs besides its own `FERRY_MODEL`, read from the environment."""

    model_config = SettingsConfigDict(env_prefix="FERRY_", frozen=True, extra="ignore")

    temporal_models: str = ""
    """Comma-separated model specs a turn may name (`ferry ask --model`) besides FERRY_MODEL."""

    def specs(self) -> tuple[str, ...]:
        """The specs listed, each of a model spec's form.

        Raises:
            ConfigError: one is not.
        """
        specs = tuple(filter(None, (spec.strip() for spec in self.temporal_models.split(","))))
        for spec in specs:
            try:
                check_model_spec(spec)
            except TurnRefused as exc:
                raise ConfigError(f"FERRY_TEMPORAL_MODELS: {exc.message}") from None
        return specs


def check_budget(settings: Settings) -> None:
    """Refuse to serve with a time budget no turn may ask for (admission.MAX_TIME_BUDGET_S).

    Raises:
        ConfigError: FERRY_TIME_BUDGET_S is longer.
    """
    if settings.time_budget_s > MAX_TIME_BUDGET_S:
        raise ConfigError(
            f"FERRY_TIME_BUDGET_S: at most {MAX_TIME_BUDGET_S:g} s (7 days) for a Temporal "
            f"worker; got {settings.time_budget_s:g}"
        )


class Steps:
    """The step activity, on a graph per model spec (the worker's own, or a `--model`'s).

    A step names a model only among those the worker runs: its `FERRY_MODEL`, and `models`
    (FERRY_TEMPORAL_MODELS), built by `graph_for_model`.
    """

    def __init__(
        self,
        graph: FerryGraph,
        settings: Settings,
        graph_for_model: Callable[[str], FerryGraph] | None = None,
        max_steps: int = MAX_STEPS,
        models: Collection[str] = (),
    ) -> None:
        check_budget(settings)
        if models and graph_for_model is None:
            raise ValueError("other models need graph_for_model to build their graphs")
        self._graph, self._settings = graph, settings
        self.max_steps = max_steps
        self.models = frozenset({settings.model, *models})
        self._graph_for_model = graph_for_model
        self._graphs: dict[str, FerryGraph] = {}  # in order of use, the latest last
        self._lock = threading.Lock()
        self._threads = concurrent.futures.ThreadPoolExecutor(max_steps, "ferry-step")

    def graph(self, model: str | None) -> FerryGraph:
        """The graph a step runs on: the worker's, or one built for the model the client named."""
        if not model or model == self._settings.model or self._graph_for_model is None:
            return self._graph
        with self._lock:
            graph = self._graphs.pop(model, None)
            self._graphs[model] = graph = graph or self._graph_for_model(model)
            if len(self._graphs) > GRAPHS_CACHED:
                del self._graphs[next(iter(self._graphs))]
            return graph

    @activity.defn(name=STEP_ACTIVITY)
    async def step(self, step: StepInput) -> StepSummary:
        """Advance the thread by one step, beating while it runs; stop early when cancelled.

        A watched reply rides on the heartbeats: a client reads the step's latest heartbeat
        (graph/temporal/client.py), so tokens reach it without going through the history.
        A step asking for more time than this worker's budget, or for a model it does not run,
        fails the turn at once (`TurnRefused`, not retried).
        """
        check_step(step, self._settings.time_budget_s, self.models)
        cancelled = threading.Event()
        info = activity.info()
        output = StepOutput(f"{info.activity_id}.{info.attempt}")
        run = functools.partial(
            advance,
            self.graph(step.model),
            step,
            self._settings,
            cancelled,
            retried=info.attempt > 1,
            output=output,
        )
        running = asyncio.get_running_loop().run_in_executor(self._threads, run)
        every = _beat_s(info.heartbeat_timeout)
        beat, waited = min(TOKENS_EVERY_S, every) if step.stream else every, 0.0
        sent: dict[str, Any] = {}
        try:
            while True:
                done, _ = await asyncio.wait({running}, timeout=beat)
                if done:
                    return running.result()
                waited += beat
                now = output.now() if step.stream else {}
                if now != sent or waited >= every:
                    activity.heartbeat(now)
                    sent, waited = now, 0.0
        except asyncio.CancelledError:
            # The graph stops after its running node and releases the thread's lease as it
            # ends: the step reports itself cancelled only then, so the turn's workflow, and
            # `ferry cancel` waiting on it, close once the thread is free.
            cancelled.set()
            await _until_done(running, every)
            raise

    @activity.defn(name=AWAITING_ACTIVITY)
    async def awaiting(self, thread_id: str) -> list[str]:
        """The ids of the thread's calls awaiting approval now, as stored."""
        config = step_config(thread_id, 0.0)
        state = await asyncio.get_running_loop().run_in_executor(
            self._threads, self._graph.get_state, config
        )
        return [str(call.get("id")) for call in pending_approvals_of(state)]

    def close(self) -> None:
        """Let the running steps finish, then release their threads."""
        self._threads.shutdown(wait=False, cancel_futures=True)


def _beat_s(timeout: timedelta | None) -> float:
    """How often a step with this heartbeat timeout beats: well within it."""
    return BEAT_S if timeout is None else min(BEAT_S, timeout.total_seconds() / 5)


async def _until_done(running: asyncio.Future[Any], every: float) -> None:
    """Wait for a cancelled step's graph to stop, beating meanwhile, however often cancelled."""
    while not running.done():
        try:
            await asyncio.wait({running}, timeout=every)
        except asyncio.CancelledError:  # a worker shutting down cancels again: still wait
            continue
        with contextlib.suppress(Exception):  # a beat after the cancel only says it lives
            activity.heartbeat()


def make_worker(
    client: Client,
    steps: Steps,
    task_queue: str,
    heartbeat_s: float = 10.0,
    workflows: Sequence[type] = (),
) -> Worker:
    """A worker for Ferry's turns on `task_queue`, and for `workflows` of the caller's own.

    `heartbeat_s` (FERRY_TEMPORAL_HEARTBEAT_S): how long a turn's next decision waits for the
    worker that made its last one, which keeps the turn cached, before any worker takes it; a
    worker killed mid-turn holds its turns no longer than their steps' heartbeat timeout.
    """
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[FerryTurn, *workflows],
        workflow_runner=WORKFLOW_RUNNER,
        activities=[steps.step, steps.awaiting],
        max_concurrent_activities=steps.max_steps,
        # A heartbeat carrying a watched reply's tokens goes out at once, not at the SDK's
        # default pace (most of the heartbeat timeout).
        max_heartbeat_throttle_interval=timedelta(seconds=TOKENS_EVERY_S),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=heartbeat_s),
    )


async def serve_graph(
    client: Client,
    graph: FerryGraph,
    settings: Settings,
    graph_for_model: Callable[[str], FerryGraph] | None = None,
    max_steps: int = MAX_STEPS,
    models: Collection[str] = (),
    workflows: Sequence[type] = (),
) -> None:
    """Run a worker on `graph` until cancelled (tests and embedding programs pass their own).

    `max_steps`: the steps it runs at once; more wait in Temporal's queue for any worker.
    `models`: the model specs a turn may name besides `settings.model`, built by
    `graph_for_model`; a turn naming another is refused. `workflows`: the caller's own, served
    beside `FerryTurn` (bench/temporal_floor.py's, whose activities run as the steps do).
    """
    steps = Steps(graph, settings, graph_for_model, max_steps, models)
    try:
        worker = make_worker(
            client,
            steps,
            settings.temporal_task_queue,
            settings.temporal_heartbeat_s,
            workflows,
        )
        await worker.run()
    finally:
        steps.close()


async def serve(
    settings: Settings,
    ready: Callable[[], None] = lambda: None,
    runtime: Runtime | None = None,
    waiting: Callable[[], None] = lambda: None,
) -> None:
    """`ferry worker`: serve Ferry's turns on the configured database until stopped.

    `ready` is called once Temporal answered and the graph is built; `runtime` as for `connect`.
    A worker started before its Temporal server waits for it, as a running one rides out the
    server's restarts; `waiting` is called once, when it starts to wait.
    """
    from graph.builder import build_graph
    from graph.models import make_model
    from graph.state import fold_messages
    from graph.storage import open_saver
    from graph.storage.stores import open_store

    check_budget(settings)
    model = make_model(settings.model)  # a missing key fails now, not once Temporal is up
    others = {spec: _listed_model(spec) for spec in WorkerModels().specs()}
    _stop_on_sigterm()
    try:
        client = await _connected(settings, runtime, waiting)
        with (
            open_saver(settings, fold=fold_messages) as saver,
            open_store(settings.db, settings.database_url) as store,
        ):

            def graph_for_model(spec: str) -> FerryGraph:
                chosen = settings.model_copy(update={"model": spec})
                return build_graph(
                    model=others[spec], checkpointer=saver, settings=chosen, store=store
                )

            graph = build_graph(model=model, checkpointer=saver, settings=settings, store=store)
            ready()
            await serve_graph(client, graph, settings, graph_for_model, models=list(others))
    except asyncio.CancelledError:  # SIGTERM, serving or still waiting for Temporal: stopped
        return


_RECONNECT_S = 1.0
"""How often a worker waiting for its Temporal server tries it again."""


async def _connected(
    settings: Settings, runtime: Runtime | None, waiting: Callable[[], None]
) -> Client:
    """A client of the Temporal server, once it answers."""
    from graph.temporal.client import TemporalUnreachable, connect

    said = False
    while True:
        try:
            return await connect(settings, runtime=runtime)
        except TemporalUnreachable:
            if not said:
                waiting()
                said = True
        await asyncio.sleep(_RECONNECT_S)


def _listed_model(spec: str) -> BaseChatModel:
    """The model of a spec FERRY_TEMPORAL_MODELS lists; its missing key fails the worker now."""
    from graph.models import make_model

    try:
        return make_model(spec)
    except ConfigError as exc:
        raise ConfigError(f"FERRY_TEMPORAL_MODELS lists {spec}: {exc}") from None


def _stop_on_sigterm() -> None:
    """SIGTERM shuts the worker down: its running steps stop and go to another worker now.

    Without it the process would simply die, and its steps would wait for the heartbeat
    timeout before running elsewhere.
    """
    task = asyncio.current_task()
    if task is None or threading.current_thread() is not threading.main_thread():
        return
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
