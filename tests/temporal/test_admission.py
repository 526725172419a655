"""What a worker takes from a turn: each field checked, a refusal naming the field (no server).

The workflow checks the turn's input as its run starts (`turn_input`); each step checks what
depends on the worker's settings (`check_step`). Both raise `TurnRefused`, a non-retryable
`ApplicationError`, so the workflow fails with one line instead of failing its task forever.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, cast

import pytest

from graph.core.settings import ConfigError, Settings
from graph.temporal.admission import (
    MAX_TIME_BUDGET_S,
    TURN_REFUSED,
    TurnRefused,
    check_step,
    turn_input,
)
from graph.temporal.shapes import StepInput, TurnInput, workflow_id
from graph.temporal.worker import GRAPHS_CACHED, Steps, WorkerModels

GOOD = TurnInput(
    thread_id="t-1",
    time_budget_s=300.0,
    question="What is 6 * 7?",
    message_id="2ad197d9-15a0-4426-b5c2-675495c69475",
    model="openai:gpt-4.1-mini",
    stream=True,
)
"""A turn as `start_turn` builds it."""


def sent(**changes: Any) -> dict[str, Any]:
    """The good turn's JSON object, with `changes` (a value of `...` leaves the field out)."""
    values = {**asdict(GOOD), **changes}
    return {name: value for name, value in values.items() if value is not ...}


def refusal(values: object, workflow: str | None = None) -> TurnRefused:
    with pytest.raises(TurnRefused) as refused:
        turn_input(values, workflow)
    return refused.value


def test_the_turn_a_client_sends_is_taken_as_it_is() -> None:
    assert turn_input(sent(), workflow_id("t-1")) == GOOD
    assert turn_input(GOOD) == GOOD  # a workflow subclass may hand the dataclass on
    decision = {"decisions": [{"type": "approve"}]}
    resumed = sent(question=None, message_id=None, decision=decision, model=None)
    assert turn_input(resumed).decision == decision
    nothing = sent(question=None, message_id=None, model=None, stream=..., decision=...)
    assert turn_input(nothing) == TurnInput(thread_id="t-1", time_budget_s=300.0)
    assert turn_input(sent(time_budget_s=60)).time_budget_s == 60.0  # JSON's 60 is an int
    assert turn_input(sent(heartbeat_s=2)).heartbeat_s == 2.0
    assert turn_input(sent(heartbeat_s=...)).heartbeat_s == 10.0  # sent before the field was


@pytest.mark.parametrize(
    ("values", "field", "allowed"),
    [
        (sent(time_budget_s=1e12), "time_budget_s", "at most 604800"),
        (sent(time_budget_s=math.inf), "time_budget_s", "got inf"),
        (sent(time_budget_s=math.nan), "time_budget_s", "got nan"),
        (sent(time_budget_s=10**400), "time_budget_s", "at most 604800"),
        (sent(time_budget_s=0), "time_budget_s", "seconds above 0"),
        (sent(time_budget_s=-5.0), "time_budget_s", "seconds above 0"),
        (sent(time_budget_s=True), "time_budget_s", "got True"),
        (sent(time_budget_s="300"), "time_budget_s", "got '300'"),
        (sent(time_budget_s=...), "time_budget_s", "got None"),
        (sent(thread_id=""), "thread_id", "printable text of 1 to 256 characters"),
        (sent(thread_id="x" * 257), "thread_id", "printable text of 1 to 256 characters"),
        (sent(thread_id="a\nb"), "thread_id", "printable text"),
        (sent(thread_id=7), "thread_id", "got 7"),
        (sent(thread_id=...), "thread_id", "got None"),
        (sent(question=""), "question", "non-empty text or null"),
        (sent(question=["hi"]), "question", "non-empty text or null"),
        (sent(message_id=None), "message_id", "with a question, its message id"),
        (sent(message_id="m" * 257), "message_id", "with a question, its message id"),
        (sent(question=None), "message_id", "only with a question"),
        (sent(decision=[1]), "decision", "an object (a resume value) or null"),
        (sent(decision={"decisions": []}), "decision", "not with a question"),
        (sent(model=""), "model", "a model spec such as openai:gpt-4.1-mini"),
        (sent(model="openai:gpt 4"), "model", "without spaces"),
        (sent(model="x" * 201), "model", "at most 200 characters"),
        (sent(model=3), "model", "got 3"),
        (sent(heartbeat_s=0.5), "heartbeat_s", "seconds from 1 to 3600; got 0.5"),
        (sent(heartbeat_s=1e9), "heartbeat_s", "seconds from 1 to 3600"),
        (sent(heartbeat_s=math.nan), "heartbeat_s", "got nan"),
        (sent(heartbeat_s=None), "heartbeat_s", "got None"),
        (sent(stream="yes"), "stream", "true or false; got 'yes'"),
        (sent(stream=None), "stream", "true or false; got None"),
        (sent(tools=["shell"]), "tools", "not a field of a turn"),
        (["t-1", 300.0], "input", "an object with the fields thread_id, time_budget_s"),
        (None, "input", "got None"),
    ],
)
def test_each_bad_field_is_refused_in_one_line_naming_it(
    values: object, field: str, allowed: str
) -> None:
    refused = refusal(values)
    assert refused.field == field
    assert refused.message.startswith(f"{field}: ") and allowed in refused.message
    assert "\n" not in refused.message
    # What makes the workflow fail at once rather than retry its task forever.
    assert refused.non_retryable and refused.type == TURN_REFUSED


def test_a_turn_on_another_thread_than_its_workflow_is_refused() -> None:
    refused = refusal(sent(thread_id="t-2"), workflow_id("t-1"))
    assert refused.message == (
        "thread_id: the thread of workflow 'ferry-thread-t-1', started as 'ferry-thread-t-2'"
    )


def step(seconds_left: float = 300.0, model: str | None = None) -> StepInput:
    return StepInput(thread_id="t-1", seconds_left=seconds_left, model=model)


def test_a_step_within_the_workers_budget_and_models_is_taken() -> None:
    models = {"offline", "openai:gpt-4.1-mini"}
    for taken in (step(), step(0.0), step(300.0 + 1e-7), step(model="openai:gpt-4.1-mini")):
        check_step(taken, 300.0, models)


@pytest.mark.parametrize(
    ("refused_step", "message"),
    [
        (
            step(1000.0),
            "time_budget_s: at most this worker's FERRY_TIME_BUDGET_S, 300 s; "
            "the turn has 1000.0 s left",
        ),
        (step(math.nan), "time_budget_s: at most this worker's FERRY_TIME_BUDGET_S, 300 s"),
        (step(-1.0), "time_budget_s: at most this worker's FERRY_TIME_BUDGET_S, 300 s"),
        (
            step(model="openai:gpt-5"),
            "model: 'openai:gpt-5' is not a model this worker runs; it runs offline, "
            "openai:gpt-4.1-mini (FERRY_MODEL, FERRY_TEMPORAL_MODELS)",
        ),
    ],
)
def test_a_step_beyond_the_workers_settings_is_refused(
    refused_step: StepInput, message: str
) -> None:
    with pytest.raises(TurnRefused) as refused:
        check_step(refused_step, 300.0, {"offline", "openai:gpt-4.1-mini"})
    assert refused.value.message.startswith(message)


def test_the_models_a_worker_runs_besides_its_own_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FERRY_TEMPORAL_MODELS", " openai:gpt-4.1, ,anthropic:claude-x ")
    assert WorkerModels().specs() == ("openai:gpt-4.1", "anthropic:claude-x")
    monkeypatch.setenv("FERRY_TEMPORAL_MODELS", "openai:gpt 4")
    with pytest.raises(ConfigError, match="^FERRY_TEMPORAL_MODELS: model: .*without spaces"):
        WorkerModels().specs()
    monkeypatch.delenv("FERRY_TEMPORAL_MODELS")
    assert WorkerModels().specs() == ()


class Built:
    """A `graph_for_model` that records each graph it builds."""

    def __init__(self) -> None:
        self.specs: list[str] = []

    def __call__(self, spec: str) -> Any:
        self.specs.append(spec)
        return f"graph of {spec}"


def steps(built: Built | None = None, models: tuple[str, ...] = (), **settings: Any) -> Steps:
    chosen = Settings(model="offline", **settings)
    return Steps(cast(Any, "own graph"), chosen, built, max_steps=1, models=models)


def test_a_worker_keeps_a_few_graphs_for_other_models_the_least_recently_used_dropped() -> None:
    built = Built()
    specs = [f"openai:m{n}" for n in range(GRAPHS_CACHED + 1)]
    worker = steps(built, tuple(specs))
    try:
        assert worker.models == {"offline", *specs}
        assert worker.graph(None) == worker.graph("offline") == "own graph"
        for spec in specs[:GRAPHS_CACHED]:
            assert worker.graph(spec) == f"graph of {spec}"
        worker.graph(specs[0])  # used again: now the latest
        worker.graph(specs[GRAPHS_CACHED])  # one too many: m1, the least recently used, goes
        worker.graph(specs[0])
        worker.graph(specs[1])
    finally:
        worker.close()
    assert built.specs == [*specs, specs[1]]


def test_a_worker_refuses_to_start_with_settings_no_turn_may_ask_for() -> None:
    with pytest.raises(ConfigError, match=f"^FERRY_TIME_BUDGET_S: at most {MAX_TIME_BUDGET_S:g}"):
        steps(time_budget_s=1e12)
    with pytest.raises(ValueError, match="graph_for_model"):
        steps(None, ("openai:gpt-4.1",))
