"""What a watcher is handed of a step's output: each item once, however often it is read."""

from __future__ import annotations

from typing import Any

from graph.temporal.client import _Shown


def test_a_steps_items_are_handed_on_once_and_malformed_ones_are_skipped() -> None:
    lines: list[str] = []
    texts: list[tuple[str, str]] = []
    shown = _Shown(lines.append, lambda reply, text: texts.append((reply, text)))
    first: list[Any] = [{"line": "✓ lookup 3 ms"}]
    shown.items("1.1", first)  # a heartbeat while the step runs
    whole: list[Any] = [*first, "not an item", {"reply": "r1"}, {"reply": "r2", "text": "42."}]
    shown.items("1.1", whole)  # the step's summary, all its items again
    shown.items("1.1", first)  # a heartbeat read late
    shown.items("1.2", first)  # the same step's next attempt is its own
    assert lines == ["✓ lookup 3 ms", "✓ lookup 3 ms"]
    assert texts == [("r1", ""), ("r2", "42.")]
