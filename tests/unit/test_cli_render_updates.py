"""The in-process runner shows every call of a step, also when LangGraph groups their updates."""

from __future__ import annotations

import io
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from graph.cli.render import Progress, show_turn
from graph.runs.runner import InProcessRunner


class _Streams:
    """Stands in for a compiled graph: `stream` yields the events it is given."""

    def __init__(self, events: list[tuple[str, Any]]) -> None:
        self.events = events

    def stream(self, *_args: Any, **_kwargs: Any) -> Iterator[tuple[str, Any]]:
        yield from self.events

    def get_state(self, _config: Any) -> Any:
        return SimpleNamespace(values={}, tasks=(), interrupts=())


def test_tool_results_that_finish_together_are_all_reported() -> None:
    calls = [
        {"name": "calculator", "args": {"expression": "1+1"}, "id": "a", "type": "tool_call"},
        {"name": "clock", "args": {}, "id": "b", "type": "tool_call"},
    ]
    first = ToolMessage("2", tool_call_id="a", name="calculator")
    second = ToolMessage("noon", tool_call_id="b", name="clock")
    events = [
        ("updates", {"call_model": {"messages": [AIMessage("", tool_calls=calls)]}}),
        # LangGraph's shape for two tasks of one node in one update (pregel/_io.py).
        ("updates", {"execute_tool": [{"messages": [first]}, {"messages": [second]}]}),
        ("updates", {"call_model": {"messages": [AIMessage("done")]}}),
    ]
    err = io.StringIO()

    runner = InProcessRunner(_Streams(events))  # type: ignore[arg-type]
    show_turn(runner.start("t", None), Progress(out=None, err=err))

    assert err.getvalue().splitlines() == [
        '→ calculator(expression="1+1")',
        "→ clock()",
        "✓ calculator",
        "✓ clock",
    ]


def test_the_report_counts_what_the_invocation_stored_whoever_streamed_it() -> None:
    """A step retried after its worker died streams its updates again; the report is read from
    the thread, beyond the messages the invocation started with."""
    from graph.runs.report import turn_report

    call = {"name": "calculator", "args": {"expression": "1+1"}, "id": "a", "type": "tool_call"}
    earlier = [
        AIMessage(
            "hello",
            id="r0",
            usage_metadata={**_usage(5, 1), "input_token_details": {"cache_read": 4}},
            response_metadata={"model_name": "gpt-4.1-mini"},
        )
    ]
    turn = [
        AIMessage("", tool_calls=[call], id="r1", usage_metadata=_usage(10, 2)),
        ToolMessage("2", tool_call_id="a", name="calculator", id="t1"),
        AIMessage("2", id="r2", usage_metadata=_usage(20, 3)),
    ]
    state = SimpleNamespace(
        values={"messages": [*earlier, *turn], "stop_reason": "answered"}, interrupts=()
    )
    report = turn_report("t", state, {"r0"})
    tokens = {k: report["usage"][k] for k in ("input_tokens", "output_tokens", "total_tokens")}
    assert (report["model_calls"], tokens) == (
        2,
        {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35},
    )
    assert [(c["id"], c["name"], c["status"]) for c in report["tool_calls"]] == [
        ("a", "calculator", "success")
    ]
    assert report["answer"] == "2"
    # The thread's ledger: every stored reply, by model, with the prompt cache's share.
    ledger = report["thread_usage"]
    assert (ledger["input_tokens"], ledger["output_tokens"], ledger["cache_read_tokens"]) == (
        35,
        6,
        4,
    )
    assert ledger["by_model"]["gpt-4.1-mini"]["cache_read_tokens"] == 4
    assert ledger["by_model"]["unknown"]["input_tokens"] == 30


def _usage(inputs: int, outputs: int) -> Any:
    return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}
