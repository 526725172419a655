"""The loop's guards: repairing unanswered calls, refusing calls, and budgets that end a turn."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    InvalidToolCall,
    ToolCall,
    ToolMessage,
)

from graph.core.messages import error_result, turn_start
from graph.core.settings import Settings
from graph.state import StopReason

INTERRUPTED = (
    "No result: the run was interrupted before this call's result was recorded. "
    "Call it again if you still need it."
)
INTERRUPTED_SIDE_EFFECT = (
    "No result: the run was interrupted before this call's result was recorded, and {tool} "
    "declares side effects (retry_safe=False): it may have taken effect. Check whether it did "
    "before calling it again."
)
"""For a call that must not run twice: "call it again" could, say, send an invoice twice."""

MAX_ARGUMENTS_CHARS = 100_000
"""Longest arguments (as JSON) a call may have; no tool needs more, and each is stored forever."""

_STOP_TEXT: dict[StopReason, str] = {
    "max_iterations": "I stopped after {model_calls} model calls, this turn's limit "
    "(FERRY_MAX_ITERATIONS), before finishing. Ask me to continue, or narrow the question.",
    "token_budget": "I stopped because this turn used {total_tokens} tokens, over its budget "
    "(FERRY_TOKEN_BUDGET), before finishing. Ask me to continue, or narrow the question.",
    "cost_budget": "I stopped because this turn's model calls reached its cost budget "
    "(FERRY_COST_BUDGET) before finishing. Ask me to continue, or narrow the question.",
    "time_budget": "I stopped because this run reached its time budget (FERRY_TIME_BUDGET_S) "
    "before finishing. Ask me to continue, or narrow the question.",
    "invalid_output": "I stopped because my answers did not match the answer schema, "
    "corrected as many times as allowed (FERRY_OUTPUT_RETRIES). Ask me again, or check the "
    "schema.",
}


def token_usage(message: BaseMessage) -> dict[str, int]:
    """Input, output and total tokens the provider reported for a reply (zeros if none)."""
    usage = message.usage_metadata if isinstance(message, AIMessage) else None
    return {
        "input_tokens": usage["input_tokens"] if usage else 0,
        "output_tokens": usage["output_tokens"] if usage else 0,
        "total_tokens": usage["total_tokens"] if usage else 0,
    }


def budget_exceeded(
    messages: Sequence[AnyMessage], settings: Settings, seconds_left: float
) -> StopReason | None:
    """Which of the turn's budgets is spent (model calls, tokens, time), or None."""
    turn = turn_counters(messages)
    if turn["model_calls"] >= settings.max_iterations:
        return "max_iterations"
    if settings.token_budget and turn["usage"]["total_tokens"] >= settings.token_budget:
        return "token_budget"
    if settings.cost_budget and turn_cost(messages, settings) >= settings.cost_budget:
        return "cost_budget"
    if seconds_left <= 0:
        return "time_budget"
    return None


def turn_cost(messages: Sequence[AnyMessage], settings: Settings) -> float:
    """What the current turn's replies cost in US dollars (those without a price: nothing)."""
    from graph.models.prices import cost_of  # its price table only where a budget is set

    return cost_of(_turn_replies(messages), settings.prices)[0]


def _turn_replies(messages: Sequence[AnyMessage]) -> list[AIMessage]:
    """The model's replies in the current turn (a guard's own final words are none)."""
    return [
        m
        for m in messages[turn_start(messages) + 1 :]
        if isinstance(m, AIMessage) and not m.response_metadata.get("ferry_guard")
    ]


def turn_counters(messages: Sequence[AnyMessage]) -> dict[str, Any]:
    """The current turn's model calls and token usage, read from its replies."""
    replies = _turn_replies(messages)
    usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for reply in replies:
        for key, tokens in token_usage(reply).items():
            usage[key] += tokens
    return {"model_calls": len(replies), "usage": usage}


def invalid_call_results(reply: AIMessage) -> list[ToolMessage]:
    """An error result for each call whose arguments did not parse, saying what was wrong."""
    return [
        ToolMessage(
            _invalid_arguments(call),
            tool_call_id=call.get("id") or "",
            name=call.get("name") or "",
            status="error",
            id=str(uuid.uuid4()),
        )
        for call in reply.invalid_tool_calls
    ]


def _invalid_arguments(call: InvalidToolCall) -> str:
    name = call.get("name") or "the tool"
    try:
        parsed = json.loads(call.get("args") or "")
    except json.JSONDecodeError as exc:
        problem = f"Arguments were not valid JSON: {exc.msg} (character {exc.pos})"
    else:
        problem = f"Arguments must be a JSON object, not {type(parsed).__name__}"
    return f"Not executed. {problem}; call {name} again with its arguments as one JSON object."


def stop_message(reason: StopReason, counters: Mapping[str, Any]) -> AIMessage:
    """The final answer a guard writes when it ends a turn (`counters`: the turn's counters)."""
    usage = counters.get("usage") or {}
    text = _STOP_TEXT[reason].format(
        model_calls=counters.get("model_calls", 0), total_tokens=usage.get("total_tokens", 0)
    )
    return AIMessage(text, id=str(uuid.uuid4()), response_metadata={"ferry_guard": reason})


def signature(call: ToolCall) -> str:
    """Name plus canonical arguments: two calls with the same signature do the same thing."""
    return call["name"] + json.dumps(call["args"], sort_keys=True, default=str)


def answered_in_turn(messages: Sequence[AnyMessage]) -> dict[str, ToolMessage]:
    """Signature → result of every call already answered in the current turn."""
    turn = messages[turn_start(messages) :]
    results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    return {
        signature(call): results[call["id"] or ""]
        for m in turn
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call["id"] in results
    }


def refusals(
    calls: Sequence[ToolCall],
    *,
    available: Sequence[str],
    disabled: set[str],
    messages: Sequence[AnyMessage],
) -> list[ToolMessage]:
    """Error results for the calls that must not run: unknown, disabled or exact duplicates."""
    earlier = answered_in_turn(messages)
    refused = []
    for call in calls:
        why = refusal(call, available=available, disabled=disabled, earlier=earlier)
        if why:
            refused.append(error_result(call, why))
        else:  # a second identical call in the same reply is a duplicate of this one
            earlier.setdefault(
                signature(call), ToolMessage("(running now)", tool_call_id=call["id"] or "")
            )
    return refused


def unknown_tool(name: str, available: Sequence[str]) -> str:
    """The error text for a call to a tool this process does not have."""
    return f"Unknown tool '{name}'. Available tools: {', '.join(available) or 'none'}."


def refusal(
    call: ToolCall,
    *,
    available: Sequence[str],
    disabled: set[str],
    earlier: dict[str, ToolMessage],
) -> str | None:
    """Why `call` must not run (unknown or disabled tool, huge arguments, duplicate), or None."""
    if call["name"] not in available:
        return unknown_tool(call["name"], available)
    size = len(json.dumps(call["args"], default=str))
    if size > MAX_ARGUMENTS_CHARS:
        return (
            f"Not executed: the arguments are {size} characters, over the limit of "
            f"{MAX_ARGUMENTS_CHARS}. Call {call['name']} again with shorter arguments."
        )
    if call["name"] in disabled:
        remaining = [name for name in available if name not in disabled]
        return (
            f"{call['name']} is disabled for the rest of this conversation after repeated "
            f"consecutive failures. Tools still available: {', '.join(remaining) or 'none'}."
        )
    previous = earlier.get(signature(call))
    if previous is not None:
        excerpt = str(previous.content)[:500]
        return (
            f"Not executed again: this exact call was already answered in this turn "
            f"(tool_call_id {previous.tool_call_id}). Use that result: {excerpt}"
        )
    return None
