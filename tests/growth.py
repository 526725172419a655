"""Grow one thread turn by turn and measure what storage each turn adds, early and late."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def bytes_per_turn(
    graph: Any, stored_bytes: Callable[[], int], *, early: int, late: int, span: int
) -> tuple[float, float, dict[str, Any]]:
    """Bytes one turn adds around turn `early` and around `late` (averaged over `span` turns).

    Returns both averages and the last result, so the caller can check the conversation too.
    """
    config = {"configurable": {"thread_id": "growth"}}
    sizes: dict[int, int] = {}
    result: dict[str, Any] = {}
    for turn in range(1, late + span + 1):
        result = graph.invoke({"messages": [("user", f"Question {turn}")]}, config)
        assert result["stop_reason"] == "answered"
        if turn in (early, early + span, late, late + span):
            sizes[turn] = stored_bytes()
    early_bytes = (sizes[early + span] - sizes[early]) / span
    late_bytes = (sizes[late + span] - sizes[late]) / span
    return early_bytes, late_bytes, result
