"""Human approval of chosen tools: the run pauses, a person decides each held call.

The pause is a LangGraph interrupt in LangChain's human-in-the-loop format
(graph/policy/hitl.py), so the CLI, Python, Studio and agent-chat-ui all see the same held
calls and resume the same way:

    Command(resume={"decisions": [{"type": "approve"}, {"type": "reject", "message": "..."}]})

one decision per held call, in order: `approve`; `edit` with `edited_action` ({name, args}: the
same tool, new arguments); `reject` with an optional `message`; `respond` with a `message` that
becomes the call's result, the tool not run (allowed only when the tool's `FERRY_APPROVE_TOOLS`
entry names it; the default is approve|edit|reject). A decision the call's review config does
not allow is refused: nothing runs, and the run pauses again on the same calls, the error
heading each call's description.

Two things hold a call: its tool is listed in `FERRY_APPROVE_TOOLS`, or the exfiltration guard
finds it quoting file content (graph/policy/exfiltration.py); such a call's description says why.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import interrupt

from graph.guards import error_result
from graph.policy.exfiltration import Guard, is_outbound, is_private
from graph.policy.hitl import (
    DEFAULT_DECISIONS,
    ApprovalDecisionError,
    Decision,
    DecisionType,
    decisions_for,
    request,
)
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
    allowed: dict[str, tuple[DecisionType, ...]] = field(default_factory=dict)
    """Tool call id → the decisions a person may make about it."""
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
    mode, listed = settings.exfiltration_guard, settings.approval_decisions
    private = {n for n, t in tools.items() if is_private(t)}
    guard = Guard(messages, private, {n for n, t in tools.items() if is_outbound(t)})
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
        elif finding or call["name"] in listed:
            result.held.append(call)
            result.allowed[call["id"] or ""] = listed.get(call["name"], DEFAULT_DECISIONS)
            if finding:
                result.reasons[call["id"] or ""] = finding.description()
    return result


def decide(reply: AIMessage, gate: Gate) -> tuple[AIMessage | None, list[ToolMessage]]:
    """Pause for a decision on the held calls; return the reply with edits, and the results.

    The edited reply keeps its id, so it replaces the stored one: the history shows the
    arguments that actually ran.
    """
    held = gate.held
    decisions = _decisions(gate)
    edits = {
        c["id"] or "": d["edited_action"]["args"]
        for c, d in zip(held, decisions, strict=True)
        if d["type"] == "edit"
    }
    results = [_result(c, d) for c, d in zip(held, decisions, strict=True) if d["type"] in _NOT_RUN]
    if not edits:
        return None, results
    calls_now = [
        {**c, "args": edits[c["id"] or ""]} if c["id"] in edits else c for c in reply.tool_calls
    ]
    return reply.model_copy(update={"tool_calls": calls_now}), results


def _decisions(gate: Gate) -> list[Decision]:
    """Pause until a resume decides every held call as its review config allows.

    A refused answer pauses again, the error heading each description: LangGraph keeps every
    answer a node has read and replays them in order, so raising instead would leave the bad
    answer to be read first by every later resume.
    """
    error = None
    while True:
        answer = interrupt(request(gate.held, gate.reasons, gate.allowed, error))
        try:
            return _allowed(decisions_for(answer, gate.held), gate)
        except ApprovalDecisionError as exc:
            error = f"Refused: {exc}. Nothing ran; decide again."


def _allowed(decisions: list[Decision], gate: Gate) -> list[Decision]:
    for call, decision in zip(gate.held, decisions, strict=True):
        allowed = gate.allowed.get(call["id"] or "", DEFAULT_DECISIONS)
        if decision["type"] not in allowed:
            raise ApprovalDecisionError(
                f"tool call {call['id']} ({call['name']}): {decision['type']!r} is not allowed "
                f"for {call['name']}, only {'|'.join(allowed)} (FERRY_APPROVE_TOOLS)"
            )
    return decisions


_NOT_RUN = ("reject", "respond")


def _result(call: ToolCall, decision: Decision) -> ToolMessage:
    """The result of a call a person rejected, or answered in the tool's place."""
    if decision["type"] == "respond":
        return ToolMessage(
            decision.get("message", ""),
            tool_call_id=call["id"] or "",
            name=call["name"],
            status="success",
            id=str(uuid.uuid4()),
        )
    reason = decision.get("message") or "no reason given"
    text = f"The user declined this call ({reason}). Do not retry it; answer without it."
    return error_result(call, text)
