"""Human approval of chosen tools: the run pauses, a person approves, edits or rejects each call.

The pause is a LangGraph interrupt, so the CLI, Python and Studio all see the same pending calls
and resume with the same decisions:

    {"<tool_call_id>": {"action": "approve"}}
    {"<tool_call_id>": {"action": "edit", "args": {...}}}
    {"<tool_call_id>": {"action": "reject", "reason": "..."}}
    {"action": "approve"}  # or reject: one decision for every pending call

Two things hold a call: its tool is listed in `FERRY_APPROVE_TOOLS`, or the exfiltration guard
finds it quoting file content (graph/exfiltration.py); such a call's entry says why in
`description`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import interrupt

from graph.exfiltration import Guard, is_outbound, is_private
from graph.guards import error_result
from graph.settings import Settings

UNDECIDED = (
    "No result: this call needed the user's approval, and the conversation went on without "
    "a decision, so it did not run. Do not call it again unless the user asks for it."
)


@dataclass
class Gate:
    """Which of a reply's calls wait for a person, why, and which are refused outright."""

    held: list[ToolCall] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    """Tool call id → why the exfiltration guard holds it."""
    refused: list[ToolMessage] = field(default_factory=list)


def gate(
    calls: Sequence[ToolCall],
    *,
    messages: Sequence[AnyMessage],
    tools: Mapping[str, BaseTool],
    settings: Settings,
    can_approve: bool,
) -> Gate:
    """Sort `calls` into held for approval, refused by the exfiltration guard, or free to run.

    A guarded call is refused, not held, when `FERRY_EXFILTRATION_GUARD=refuse` or when no one
    can approve in this run (`can_approve`): a pause nobody answers would only stall the run,
    while a refusal lets the model answer without the call.
    """
    mode = settings.exfiltration_guard
    guard = Guard(messages, {n for n, t in tools.items() if is_private(t)})
    result = Gate()
    for call in calls:
        outbound = mode != "off" and is_outbound(tools.get(call["name"]))
        finding = guard.finding(call) if outbound else None
        if finding and (mode == "refuse" or not can_approve):
            why = (
                "FERRY_EXFILTRATION_GUARD=refuse forbids that"
                if mode == "refuse"
                else "that needs the user's approval, and no one can give it in this run"
            )
            result.refused.append(error_result(call, finding.refusal(why)))
        elif finding or call["name"] in settings.approval_required:
            result.held.append(call)
            if finding:
                result.reasons[call["id"] or ""] = finding.description()
    return result


def pending_approvals(
    calls: list[ToolCall], reasons: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """What a person is shown for each call awaiting approval (and why, when a guard held it)."""
    shown = []
    for call in calls:
        entry = {"id": call["id"], "name": call["name"], "args": call["args"]}
        if reasons and call["id"] in reasons:
            entry["description"] = reasons[call["id"] or ""]
        shown.append(entry)
    return shown


def _decision(decisions: Any, call_id: str | None) -> dict[str, Any]:
    if isinstance(decisions, dict) and "action" in decisions:
        return decisions
    chosen = decisions.get(call_id) if isinstance(decisions, dict) else None
    return chosen if isinstance(chosen, dict) else {"action": "reject", "reason": "no decision"}


def decide(
    reply: AIMessage, calls: list[ToolCall], reasons: Mapping[str, str] | None = None
) -> tuple[AIMessage | None, list[ToolMessage]]:
    """Pause for a decision on `calls`; return the reply with edited arguments, and rejections.

    The edited reply keeps its id, so it replaces the stored one: the history shows the
    arguments that actually ran.
    """
    decisions = interrupt({"pending_approvals": pending_approvals(calls, reasons)})
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
