"""What the workflow and its activities hand each other: small, plain, JSON-serialisable.

The workflow's sandbox imports this module on every replay, so it imports nothing but the
standard library: no LangChain message crosses it, only the summary an activity returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WORKFLOW_NAME = "FerryTurn"
STEP_ACTIVITY = "ferry_step"
AWAITING_ACTIVITY = "ferry_awaiting"
"""The ids of the thread's calls awaiting approval now, as stored (a short read)."""
PROGRESS_UPDATE = "progress"
DECIDE_UPDATE = "decide"
SET_ASIDE_UPDATE = "set_aside"

STEP, END = "step", "end"
"""What runs next: another step (the released tool calls, then the model), or nothing."""


def workflow_id(thread_id: str) -> str:
    """The workflow that runs a thread's turns: one at a time, by Temporal's own id rule."""
    return f"ferry-thread-{thread_id}"


@dataclass
class TurnInput:
    """What starts a turn: a question, a person's decision, or nothing (resume the thread).

    A worker takes it only through graph/temporal/admission.py's checks.
    """

    thread_id: str
    time_budget_s: float
    question: str | None = None
    message_id: str | None = None
    """The question's message id, fixed by the client, so a retried step stores it once."""
    decision: dict[str, Any] | None = None
    """A resume value (`{"decisions": [...]}`) for calls awaiting approval."""
    model: str | None = None
    """A model spec overriding the worker's `FERRY_MODEL` (`--model`)."""
    stream: bool = False
    """The client shows the answer's tokens as they come (`StepInput.stream`)."""
    response_format: str | None = None
    """A JSON schema the turn's answer must match (`--schema`; graph/output.py)."""
    heartbeat_s: float = 10.0
    """How long a step may go without a heartbeat before it runs on another worker (the
    client's `FERRY_TEMPORAL_HEARTBEAT_S`); histories recorded before the field replay on 10 s."""


@dataclass
class StepInput:
    """One activity: advance the thread by one step (its tool calls, then one model call)."""

    thread_id: str
    seconds_left: float
    question: str | None = None
    message_id: str | None = None
    decision: dict[str, Any] | None = None
    model: str | None = None
    stream: bool = False
    """Someone watches the reply's tokens: the step heartbeats them as they come."""
    response_format: str | None = None
    since: str | None = None
    """The checkpoint the invocation started from (its report counts what was stored after);
    `""` for a thread that had none, None for a turn's first step, which finds it."""


@dataclass
class StepSummary:
    """What a step did and what comes next, as the workflow needs it to decide."""

    next: str
    """`STEP` or `END`."""
    report: dict[str, Any] = field(default_factory=dict)
    """The invocation's report, read from the stored thread (graph/runs/report.py) as every
    runner's is, in the summary of the step where the turn stops or pauses (`next == END`)."""
    output: list[dict[str, str]] = field(default_factory=list)
    """What the step shows, in order: `{"line": ...}`, a progress line as `ferry ask` prints
    it on stderr, and `{"reply": id, "text": ...}`, a model reply's whole text."""
    since: str = ""
    """The checkpoint the invocation started from (`StepInput.since`, found if it was None)."""
    checkpoint: str = ""
    """The thread's latest checkpoint after the step: where an invocation after a pause starts."""
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    """The calls the turn paused on (the report's): a field of its own, which the workflow
    decides by, as the histories of turns recorded before `report` existed hold it."""


@dataclass
class Progress:
    """What a client watching the turn is told: output after what it has, and the outcome."""

    output: list[dict[str, str]]
    state: str
    """`running`, `awaiting_approval` or `done`."""
    report: dict[str, Any] | None = None
    """`ask --json`'s object, once the turn stopped or paused."""


REPORT_KEYS = (
    *("thread_id", "answer", "stop_reason", "output", "model_calls", "models", "tool_calls"),
    *("usage", "thread_usage"),
)
"""`turn_report`'s keys in order (graph/runs/report.py; tests/temporal/test_cli.py compares)."""
CALL_KEYS = ("id", "name", "args", "status", "duration_ms")
PENDING_KEYS = ("id", "name", "args", "description")


def ordered_report(report: dict[str, Any]) -> dict[str, Any]:
    """The report in `ask --json`'s key order (Temporal's JSON payloads sort keys)."""
    ordered = {key: report[key] for key in REPORT_KEYS if key in report}
    ordered["tool_calls"] = [
        {key: call[key] for key in CALL_KEYS if key in call} for call in report["tool_calls"]
    ]
    if "pending_approvals" in report:
        ordered["pending_approvals"] = [
            {key: call[key] for key in PENDING_KEYS if key in call}
            for call in report["pending_approvals"]
        ]
    return {**ordered, **{k: v for k, v in report.items() if k not in ordered}}
