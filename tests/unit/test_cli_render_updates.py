"""The CLI's run reader counts every call of a step, also when LangGraph groups their updates."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from graph.cli.render import Progress, RunSummary, stream_run


class _Streams:
    """Stands in for a compiled graph: `stream` yields the events it is given."""

    def __init__(self, events: list[tuple[str, Any]]) -> None:
        self.events = events

    def stream(self, *_args: Any, **_kwargs: Any) -> Iterator[tuple[str, Any]]:
        yield from self.events


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
    summary = RunSummary()

    stream_run(_Streams(events), {}, {}, Progress(out=None, err=err), summary)  # type: ignore[arg-type]

    assert [m.tool_call_id for m in summary.results] == ["a", "b"]
    assert summary.model_calls == 2
    assert [line.split()[0] for line in err.getvalue().splitlines()] == ["→", "→", "✓", "✓"]
