"""The report of an invocation, computed from what it stored: the same for every runner.

An invocation (`ferry ask`, a resume, a Temporal turn) is what the thread stored after it began:
the messages whose ids its starting point did not hold. Counting those — replies (model calls
and their usage) and results (tool calls, status, duration) — instead of what a client saw
stream by, a step retried after a worker died, a client that re-attached, or results replayed
after a crash change nothing in the report.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from graph.core.hitl import awaiting
from graph.core.settings import ModelPrice, get_settings
from graph.guards import token_usage
from graph.models.prices import cost_of, reply_cost
from graph.output import is_answer


def message_ids(state: Any) -> frozenset[str]:
    """The ids of the messages a stored state holds: where an invocation starts from."""
    values = getattr(state, "values", None) or {}
    return frozenset(m.id for m in values.get("messages") or [] if m.id)


def pending_approvals_of(state: Any) -> list[dict[str, Any]]:
    """Tool calls the run is paused on, waiting for a person's decision."""
    return [call for pause in getattr(state, "interrupts", ()) for call in awaiting(pause.value)]


def answer_of(messages: Sequence[BaseMessage]) -> str:
    """The text of the last assistant message."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return str(message.text)
    return ""


def turn_report(
    thread_id: str,
    state: Any,
    before: Collection[str],
    prices: Mapping[str, ModelPrice] | None = None,
) -> dict[str, Any]:
    """The one JSON object `--json` prints, for what `state` holds beyond the ids `before`.

    `prices`: FERRY_PRICES, read from the environment when not given (a worker passes the
    settings it read once: reading them costs more than the rest of the report).
    """
    values: dict[str, Any] = getattr(state, "values", None) or {}
    messages: list[BaseMessage] = values.get("messages") or []
    pending = pending_approvals_of(state)
    new = [m for m in messages if m.id not in before]
    replies = [
        m for m in new if isinstance(m, AIMessage) and not m.response_metadata.get("ferry_guard")
    ]
    prices = get_settings().prices if prices is None else prices
    usage: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for reply in replies:
        for key, tokens in token_usage(reply).items():
            usage[key] += tokens
    usage.update(_cost(replies, prices))
    calls = {c["id"]: c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    report: dict[str, Any] = {
        "thread_id": thread_id,
        "answer": answer_of(messages) if values.get("stop_reason") and not pending else "",
        "stop_reason": "awaiting_approval" if pending else values.get("stop_reason"),
        "output": values.get("structured_response"),
        "model_calls": len(replies),
        "models": [_model_of(reply) for reply in replies],
        "tool_calls": [
            {
                "id": r.tool_call_id,
                "name": r.name,
                "args": calls[r.tool_call_id]["args"] if r.tool_call_id in calls else {},
                "status": r.status,
                "duration_ms": r.response_metadata.get("duration_ms", 0),
            }
            for r in new
            if isinstance(r, ToolMessage) and not is_answer(r)
        ],
        "usage": usage,
        "thread_usage": thread_usage(messages, prices),
    }
    if pending:
        shown = ("id", "name", "args", "description")
        report["pending_approvals"] = [{k: p[k] for k in shown if k in p} for p in pending]
    return report


def thread_usage(
    messages: Sequence[BaseMessage], prices: Mapping[str, ModelPrice] | None = None
) -> dict[str, Any]:
    """What the whole thread used, from its stored replies (the usage ledger).

    Tokens in and out, read from and written to providers' prompt caches, and what they cost
    (`cost_usd`; `unpriced_calls` counts replies of models without a price), in all and by
    model. Read from the thread, it survives a resume and works on every saver.
    """
    prices = get_settings().prices if prices is None else prices
    total = _ledger_row()
    by_model: dict[str, dict[str, Any]] = {}
    replies = [
        m
        for m in messages
        if isinstance(m, AIMessage) and not m.response_metadata.get("ferry_guard")
    ]
    for reply in replies:
        row = by_model.setdefault(_model_of(reply) or "unknown", _ledger_row())
        usage: dict[str, Any] = dict(reply.usage_metadata or {})
        details = usage.get("input_token_details") or {}
        counts = {
            **token_usage(reply),
            "cache_read_tokens": int(details.get("cache_read") or 0),
            "cache_creation_tokens": int(details.get("cache_creation") or 0),
        }
        cost = reply_cost(reply, prices)  # each reply priced once
        counts["unpriced_calls"] = int(cost is None)
        for key, amount in {**counts, "cost_usd": cost or 0.0}.items():
            row[key] += amount
            total[key] += amount
    for row in (total, *by_model.values()):
        row["cost_usd"] = round(row["cost_usd"], 6)
    return {**total, "by_model": by_model}


def _ledger_row() -> dict[str, Any]:
    keys = ("input_tokens", "output_tokens", "total_tokens")
    row: dict[str, Any] = dict.fromkeys((*keys, "cache_read_tokens", "cache_creation_tokens"), 0)
    return {**row, "cost_usd": 0.0, "unpriced_calls": 0}


def _cost(replies: Sequence[AIMessage], prices: Mapping[str, ModelPrice]) -> dict[str, Any]:
    """What `replies` cost in US dollars, and how many have no price (and count nothing)."""
    dollars, unpriced = cost_of(replies, prices)
    return {"cost_usd": round(dollars, 6), "unpriced_calls": unpriced}


def _model_of(reply: AIMessage) -> str | None:
    """Which model wrote a reply: the spec a fallback chose, else the provider's model name."""
    metadata = reply.response_metadata
    named = metadata.get("ferry_model") or metadata.get("model_name") or metadata.get("model")
    return str(named) if named else None


def nothing_done(thread_id: str, state: Any) -> dict[str, Any]:
    """The report of a resume that found nothing to do: no calls, no answer, `resumed: false`."""
    return {**turn_report(thread_id, state, message_ids(state)), "answer": "", "resumed": False}
