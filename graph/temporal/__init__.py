"""Ferry on Temporal: turns that survive their worker, spread over any number of machines.

Design. A turn is a Temporal workflow, `FerryTurn` (graph/temporal/workflow.py), whose id comes
from the thread (`ferry-thread-<id>`, started with the FAIL conflict policy), so Temporal itself
runs one turn per thread. What the workflow does is the loop's order and nothing else:

- workflow code (deterministic, replayed): whether another step runs, read from the last
  step's small summary; the turn's time budget, as a deadline on `workflow.now()` handed to
  each step as the time left; the wait for a person's decision (the `decide` update that
  `ferry resume --approve|--reject` sends) and a fresh budget after it, as in-process, with a
  look at the stored thread now and then (a pause decided in-process, from Studio, ends the
  turn); the running report `ask --json` prints, summed from the steps; the `progress` update
  clients watch. No I/O, no wall clock, no LangChain import.
- activities (graph/temporal/steps.py): one *step* of Ferry's own compiled graph on the thread,
  one invocation each, stopped by `interrupt_after=["check"]`: the `execute_tool` tasks the last
  `check` released (one LangGraph task per call, so each finished call is a saved write), then
  `call_model` and `check`. The first step stores the turn's input once (its message id is fixed
  by the client). A step's lines and, when a client streams, its reply so far ride on its
  heartbeats, which the client reads (never the history). The guards are `check`'s, unchanged:
  iteration cap, token budget, duplicates, the circuit breaker, approvals, the exfiltration
  guard — decided from the stored thread, the same on every worker. Steps retry under
  `STEP_RETRIES` (Ferry's backoff) and beat every 2 s, so a worker that dies mid-step is noticed
  in 10 s (FERRY_TEMPORAL_HEARTBEAT_S, sent with the turn) and its step runs on another worker:
  the thread's lease (30 s) is waited for, finished calls replay from their writes, and a
  `retry_safe=False` call that had started is answered from its start record instead of running
  again.

Every field of a turn's input is checked where it enters the worker (graph/temporal/admission.py):
by the workflow as its run starts, and by each step against its worker's settings (time budget,
models). A refusal fails the workflow at once with one line; anything else raised in workflow
code would fail its task, which Temporal retries forever. Whoever may start workflows or send
updates on the namespace may decide every thread's paused calls: protect it as the database.

The thread stays where it is stored today (`FERRY_DB`, `FERRY_DATABASE_URL` across hosts),
written by the graph's own checkpointer: `ferry history`, `ferry threads`, Python and Studio see
a Temporal turn exactly as an in-process one, and a thread may go back and forth.

Why not `temporalio-langgraph` (0.1.0, public preview): it runs the Pregel loop inside the
workflow and each node as an activity, with the graph's state carried in Temporal's history and
an in-memory checkpointer in the workflow. Ferry's threads would then live in two places, the
stored one would not see Temporal turns, and Ferry's guards that read the stored thread (start
records, leases, the repair of unanswered calls) would have nothing to read. Running whole
supersteps of Ferry's compiled graph as activities keeps one store and one implementation.

Cost: a turn of n tool rounds is n + 1 activities, one a model call; on a 2-core loopback
machine each adds a few tens of ms to a turn against in-process, of which Temporal's own
round trip for an activity is most (bench/temporal_scale.py measures both): the price of
surviving any worker's death; with real models (seconds a call) it is a few percent.

Python: `report = await run_turn(await connect(), thread_id, "question")`, the object
`ferry ask --json` prints. CLI: `ferry worker`, `ferry cancel`, and `ask`/`chat`/`resume` with
`FERRY_TEMPORAL_ADDRESS` or `--temporal ADDRESS`, through `TemporalRunner` (runner.py).
"""

from __future__ import annotations

from graph.temporal.client import (
    TurnFailed,
    TurnRunning,
    cancel,
    connect,
    decide,
    run_turn,
    running_turn,
    start_turn,
    watch,
)
from graph.temporal.shapes import workflow_id

__all__ = [
    "TurnFailed",
    "TurnRunning",
    "cancel",
    "connect",
    "decide",
    "run_turn",
    "running_turn",
    "start_turn",
    "watch",
    "workflow_id",
]
