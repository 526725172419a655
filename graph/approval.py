"""Human approval of chosen tools: the run pauses, a person approves, edits or rejects each call.

The pause is a LangGraph interrupt, so the CLI, Python and Studio all see the same pending calls
and resume with the same decisions:

    {"<tool_call_id>": {"action": "approve"}}
    {"<tool_call_id>": {"action": "edit", "args": {...}}}
    {"<tool_call_id>": {"action": "reject", "reason": "..."}}
    {"action": "approve"}  # or reject: one decision for every pending call
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.types import interrupt

from graph.guards import error_result


def pending_approvals(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """What a person is shown for each call awaiting approval."""
    return [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in calls]


def _decision(decisions: Any, call_id: str | None) -> dict[str, Any]:
    if isinstance(decisions, dict) and "action" in decisions:
        return decisions
    chosen = decisions.get(call_id) if isinstance(decisions, dict) else None
    return chosen if isinstance(chosen, dict) else {"action": "reject", "reason": "no decision"}


def decide(reply: AIMessage, calls: list[ToolCall]) -> tuple[AIMessage | None, list[ToolMessage]]:
    """Pause for a decision on `calls`; return the reply with edited arguments, and rejections.

    The edited reply keeps its id, so it replaces the stored one: the history shows the
    arguments that actually ran.
    """
    decisions = interrupt({"pending_approvals": pending_approvals(calls)})
    edits: dict[str, dict[str, Any]] = {}
    rejected: list[ToolMessage] = []
    for call in calls:
        decision = _decision(decisions, call["id"])
        action = decision.get("action")
        if action == "edit" and isinstance(decision.get("args"), dict):
            edits[call["id"] or ""] = decision["args"]
        elif action != "approve":
            reason = str(decision.get("reason") or "no reason given")
            text = f"The user declined this call ({reason}). Do not retry it; answer without it."
            rejected.append(error_result(call, text))
    if not edits:
        return None, rejected
    calls_now = [
        {**c, "args": edits[c["id"] or ""]} if c["id"] in edits else c for c in reply.tool_calls
    ]
    return reply.model_copy(update={"tool_calls": calls_now}), rejected
