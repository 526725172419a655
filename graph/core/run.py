"""What one invocation carries: its id and clock, the log line helper, the time left."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.core.settings import Settings

log = logging.getLogger("ferry.loop")


CAN_APPROVE = "ferry_can_approve"
"""`configurable` key: False when no person can answer an approval prompt during this run.

The CLI sets it (`--json` or no terminal, and no decision given); Python and server runs
default to True, since their caller sees the interrupt and can resume with a decision.
"""


@dataclass
class RunContext:
    """Per-invocation facts: its id (for logs) and when it started (for the time budget).

    `FerryGraph` makes one for every invocation that is not given one (graph/builder.py); the
    graph declares no context schema, since neither is a setting Studio should offer. The start
    is not a field, so a caller cannot move it and escape the time budget.
    """

    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    """Names this invocation in every log line; a new UUID unless given."""

    def __post_init__(self) -> None:
        """Start the invocation's clock."""
        self.started_at: float = time.monotonic()
        self.span: Any = None
        """The invocation's OpenTelemetry span, parent of its model and tool calls' spans;
        None when tracing is off (graph/tracing)."""


def run_ids(config: RunnableConfig, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The thread and run ids every log line of this invocation carries."""
    context = runtime.context or RunContext()
    return {"thread_id": config.get("configurable", {}).get("thread_id"), "run_id": context.run_id}


def emit(
    message: str, ids: dict[str, Any], event: str, level: int = logging.INFO, **fields: Any
) -> None:
    """One log line with the run's ids; structured fields go to JSON logs."""
    log.log(level, message, extra={**ids, "event": event, **fields})


def seconds_left(settings: Settings, runtime: Runtime[RunContext]) -> float:
    """What is left of this invocation's time budget (`FERRY_TIME_BUDGET_S`)."""
    started = runtime.context.started_at if runtime.context else time.monotonic()
    return started + settings.time_budget_s - time.monotonic()
