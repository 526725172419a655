"""What a worker takes from a turn's input: each field checked, anything else refused.

Whoever can start a workflow on Ferry's namespace and task queue hands the workers any input
they like (docs/temporal.md), so none of it is trusted. The workflow checks
the turn's input as its run starts, before it computes a deadline from it (`turn_input`); each
step checks what depends on the worker's own settings, its time budget and the models it runs
(`check_step`). A refusal is a non-retryable `ApplicationError` naming the field and what is
allowed: the workflow fails with that one line. Any other exception in workflow code (an
overflowing deadline, a field of the wrong type) would fail the workflow's *task* instead,
which Temporal retries forever, and the turn would hang.

The workflow's sandbox imports this module: it imports only the standard library, Temporal's
exceptions and the plain shapes.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import asdict, fields
from typing import Any, TypeGuard

from temporalio.exceptions import ApplicationError

from graph.temporal.shapes import StepInput, TurnInput, workflow_id

TURN_REFUSED = "TurnRefused"
"""The error type of a refused turn, as a client reads it from the failure."""
MAX_TIME_BUDGET_S = 7 * 24 * 3600.0
"""The longest time budget a turn may ask for, whatever the workers allow: a deadline that
`datetime` and Temporal's timeouts hold. A worker whose `FERRY_TIME_BUDGET_S` is longer does not
start."""
MAX_ID_CHARS = 256
"""A thread id or a message id: the workflow id (`ferry-thread-<id>`) stays within Temporal's."""
MAX_SCHEMA_CHARS = 100_000
"""An answer schema (`--schema`): its form is checked by the step (`check_step`), outside the
workflow's sandbox, which imports no JSON Schema validator."""
MAX_MODEL_CHARS = 200
"""A model spec (`openai:gpt-4.1-mini`): a provider and a model name, never long."""
ROUNDING_S = 1e-6
"""The workflow's deadline is a `timedelta`, kept in microseconds: a step's time left may be the
budget rounded up by less than this."""
MIN_HEARTBEAT_S, MAX_HEARTBEAT_S = 1.0, 3600.0
"""A step's heartbeat timeout, as `FERRY_TEMPORAL_HEARTBEAT_S` allows it."""
FIELDS = tuple(f.name for f in fields(TurnInput))


class TurnRefused(ApplicationError):
    """A turn's input a worker does not take; the workflow fails with its one line."""

    def __init__(self, field: str, allowed: str) -> None:
        super().__init__(f"{field}: {allowed}", type=TURN_REFUSED, non_retryable=True)
        self.field = field


def turn_input(sent: object, workflow: str | None = None) -> TurnInput:
    """Check a turn's input as sent (its JSON object, or a `TurnInput`) and return it.

    Args:
        sent: The workflow's argument, decoded as plain JSON.
        workflow: The id of the workflow it started; its thread must be the input's.

    Raises:
        TurnRefused: a field is missing, unknown, of the wrong type or out of range; the
            first one found is named.
    """
    values = asdict(sent) if isinstance(sent, TurnInput) else sent
    if not isinstance(values, dict):
        raise TurnRefused(
            "input", f"an object with the fields {', '.join(FIELDS)}; got {_shown(values)}"
        )
    unknown = [str(name) for name in values if name not in FIELDS]
    if unknown:
        raise TurnRefused(unknown[0], f"not a field of a turn; its fields are {', '.join(FIELDS)}")
    turn = TurnInput(
        thread_id=_thread_id(values.get("thread_id"), workflow),
        time_budget_s=_time_budget(values.get("time_budget_s")),
        question=_question(values.get("question")),
        message_id=_optional(values, "message_id", str, "text"),
        decision=_optional(values, "decision", dict, "an object (a resume value)"),
        model=_model(values.get("model")),
        stream=_stream(values.get("stream", False)),
        response_format=_response_format(values.get("response_format")),
        heartbeat_s=_heartbeat(values.get("heartbeat_s", TurnInput.heartbeat_s)),
    )
    _check_together(turn)
    return turn


def check_step(step: StepInput, budget_s: float, models: Collection[str]) -> None:
    """Refuse a step the worker's settings do not allow: more time, or a model it does not run.

    Args:
        step: The step the workflow scheduled, from a turn `turn_input` took.
        budget_s: The worker's `FERRY_TIME_BUDGET_S`.
        models: The model specs the worker runs (its `FERRY_MODEL` among them).

    Raises:
        TurnRefused: the step asks for more time than `budget_s`, for another model, or
            for answers in a schema that cannot work.
    """
    left = step.seconds_left
    if not (_is_number(left) and 0 <= left <= budget_s + ROUNDING_S):
        raise TurnRefused(
            "time_budget_s",
            f"at most this worker's FERRY_TIME_BUDGET_S, {budget_s:g} s; the turn has "
            f"{_shown(left)} s left",
        )
    if step.model is not None and step.model not in models:
        raise TurnRefused(
            "model",
            f"{_shown(step.model)} is not a model this worker runs; it runs "
            f"{', '.join(sorted(models))} (FERRY_MODEL, FERRY_TEMPORAL_MODELS)",
        )
    if step.response_format is not None:
        from graph.core.settings import ConfigError
        from graph.output import RUN_KEY, of_run  # the worker's, outside the sandbox

        try:
            of_run({"configurable": {RUN_KEY: step.response_format}}, None)
        except ConfigError as exc:
            raise TurnRefused("response_format", str(exc)) from None


def check_model_spec(spec: object) -> str:
    """A model spec's form: non-empty printable text without spaces, at most 200 characters.

    Raises:
        TurnRefused: it is not.
    """
    if not (
        isinstance(spec, str)
        and 0 < len(spec) <= MAX_MODEL_CHARS
        and spec.isprintable()
        and not any(c.isspace() for c in spec)
    ):
        raise TurnRefused(
            "model",
            f"a model spec such as openai:gpt-4.1-mini, at most {MAX_MODEL_CHARS} characters "
            f"without spaces; got {_shown(spec)}",
        )
    return spec


def _thread_id(value: object, workflow: str | None) -> str:
    if not _is_id(value):
        raise TurnRefused(
            "thread_id",
            f"printable text of 1 to {MAX_ID_CHARS} characters; got {_shown(value)}",
        )
    if workflow is not None and workflow != workflow_id(value):
        # Temporal runs one turn per thread by workflow id: a turn on another thread would
        # escape that rule.
        raise TurnRefused(
            "thread_id",
            f"the thread of workflow {_shown(workflow)}, started as {workflow_id(value)!r}",
        )
    return value


def _time_budget(value: object) -> float:
    if not (_is_number(value) and 0 < value <= MAX_TIME_BUDGET_S):
        raise TurnRefused(
            "time_budget_s",
            f"seconds above 0, at most {MAX_TIME_BUDGET_S:g} and at most the workers' "
            f"FERRY_TIME_BUDGET_S; got {_shown(value)}",
        )
    return float(value)


def _heartbeat(value: object) -> float:
    if not (_is_number(value) and MIN_HEARTBEAT_S <= value <= MAX_HEARTBEAT_S):
        raise TurnRefused(
            "heartbeat_s",
            f"seconds from {MIN_HEARTBEAT_S:g} to {MAX_HEARTBEAT_S:g}; got {_shown(value)}",
        )
    return float(value)


def _question(value: object) -> str | None:
    if value is not None and not (isinstance(value, str) and value):
        raise TurnRefused("question", f"non-empty text or null; got {_shown(value)}")
    return value


def _model(value: object) -> str | None:
    return None if value is None else check_model_spec(value)


def _response_format(value: object) -> str | None:
    if value is not None and not (isinstance(value, str) and len(value) <= MAX_SCHEMA_CHARS):
        raise TurnRefused(
            "response_format",
            f"a JSON schema as text, {MAX_SCHEMA_CHARS} characters at most, or null; got "
            f"{_shown(value)}",
        )
    return value


def _stream(value: object) -> bool:
    if not isinstance(value, bool):
        raise TurnRefused("stream", f"true or false; got {_shown(value)}")
    return value


def _optional(values: dict[Any, Any], name: str, kind: type, what: str) -> Any:
    value = values.get(name)
    if value is not None and not isinstance(value, kind):
        raise TurnRefused(name, f"{what} or null; got {_shown(value)}")
    return value


def _check_together(turn: TurnInput) -> None:
    """A turn is a question (with its message id), a decision, or neither: never both."""
    if turn.question is not None and not _is_id(turn.message_id):
        raise TurnRefused(
            "message_id",
            f"with a question, its message id: printable text of 1 to {MAX_ID_CHARS} "
            f"characters; got {_shown(turn.message_id)}",
        )
    if turn.question is None and turn.message_id is not None:
        raise TurnRefused("message_id", "only with a question")
    if turn.question is not None and turn.decision is not None:
        raise TurnRefused("decision", "not with a question: a turn asks or decides")


def _is_id(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS and value.isprintable()


def _is_number(value: object) -> TypeGuard[float]:
    """A finite int or float; JSON's `true` is not a number, nor NaN or Infinity."""
    if isinstance(value, bool):
        return False
    # An int is finite however long (JSON may spell one too long for a float).
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _shown(value: object) -> str:
    """The value as the refusal quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
