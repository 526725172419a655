"""Human approval of chosen tools: the run pauses, a person decides each held call.

The pause is a LangGraph interrupt in LangChain's human-in-the-loop format
(graph/core/hitl.py), so the CLI, Python, Studio and agent-chat-ui all see the same held
calls and resume the same way:

    Command(resume={"decisions": [{"type": "approve"}, {"type": "reject", "message": "..."}]})

one decision per held call, in order: `approve`; `edit` with `edited_action` ({name, args}: the
same tool, new arguments); `reject` with an optional `message`; `respond` with a `message` that
becomes the call's result, the tool not run (allowed only when the tool's `FERRY_APPROVE_TOOLS`
entry names it; the default is approve|edit|reject). A decision the call's review config does
not allow is refused: nothing runs, and the run pauses again on the same calls, the error
heading each call's description.

Three things hold a call: its tool is listed in `FERRY_APPROVE_TOOLS`, its metadata asks for
approval (`metadata={"approval": "<why>"}`: MCP tools that may change things), or the outbound
rule (`Outbound` below) stops it; the description of a call held by a rule says why.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import interrupt

from graph.core.hitl import (
    DEFAULT_DECISIONS,
    PREFIX,
    ApprovalDecisionError,
    Decision,
    DecisionType,
    decisions_for,
    request,
)
from graph.core.messages import error_result
from graph.core.settings import Settings
from graph.policy.exfiltration import (
    Finding,
    Guard,
    is_outbound,
    is_private,
    private_sources,
)

UNDECIDED = (
    "No result: this call needed the user's approval, and the conversation went on without "
    "a decision, so it did not run. Do not call it again unless the user asks for it."
)


@dataclass
class Gate:
    """Which of a reply's calls wait for a person, why, and which are refused outright."""

    held: list[ToolCall] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    """Tool call id → why it is held, when a rule (not only `FERRY_APPROVE_TOOLS`) holds it."""
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
    also_private: Sequence[str] = (),
) -> Gate:
    """Sort `calls` into held for approval, refused, or free to run.

    Held: tools `FERRY_APPROVE_TOOLS` lists or whose metadata asks for approval (MCP tools that
    may change things), and outbound calls the outbound rule stops (`Outbound`), like any held
    call even where no one can approve in this run (`--json` stops `awaiting_approval`). An
    outbound call is refused instead under `FERRY_EXFILTRATION_GUARD=deny`, and under `allow`
    when no one can approve (`can_approve`), as the quote detector always did.
    """
    listed = settings.approval_decisions
    rule = Outbound(messages, tools, settings.exfiltration_guard, also_private)
    result = Gate()
    for call in calls:
        tool = tools.get(call["name"])
        stopped = rule.stops(call) if is_outbound(tool) else None
        if stopped and (rule.mode == "deny" or (rule.mode == "allow" and not can_approve)):
            result.refused.append(error_result(call, stopped.refusal()))
            continue
        asks = (tool.metadata or {}).get("approval") if tool is not None else None
        if stopped or asks or call["name"] in listed:
            result.held.append(call)
            result.allowed[call["id"] or ""] = listed.get(call["name"], DEFAULT_DECISIONS)
            whys = [
                *([stopped.description()] if stopped else []),
                *([f"{PREFIX}: {call['name']} asks first, since {asks}."] if asks else []),
            ]
            if whys:
                result.reasons[call["id"] or ""] = " ".join(whys)
    return result


@dataclass(frozen=True)
class Stopped:
    """Why the outbound rule stops a call: the private data in context, and any quote of it."""

    call: ToolCall
    sources: list[str]
    """The private results in the model's context, as read (`read_file(notes.txt)`)."""
    finding: Finding | None
    mode: str

    def description(self) -> str:
        """One line for the person deciding: what would leave, after what was read."""
        if self.mode == "allow" and self.finding:
            return self.finding.description()
        found = self.finding
        hint = f" It quotes {found.source} (“{found.shown()}”)." if found else ""
        return (
            f"Held because this conversation read private data ({_listed(self.sources)}) and "
            f"{self.call['name']} would send the arguments shown off this machine.{hint} "
            "Approve only if they may leave."
        )

    def refusal(self) -> str:
        """The error result the model gets instead of a result (refused, or no one to ask)."""
        why = (
            "FERRY_EXFILTRATION_GUARD=deny forbids outbound calls once private data was read"
            if self.mode == "deny"
            else "that needs the user's approval, and no one can give it in this run"
        )
        if self.mode == "allow" and self.finding:
            return self.finding.refusal(why)
        return (
            f"Not executed: this conversation read private data ({_listed(self.sources)}), and "
            f"{self.call['name']} would send its arguments off this machine; {why}. Answer "
            "the user from what you have; for anything that needs the network, they can ask "
            "in a new conversation."
        )


class Outbound:
    """The outbound rule: after private data, nothing leaves without a decision.

    `FERRY_EXFILTRATION_GUARD` picks it: `ask` (a person decides each outbound call of a thread
    whose model context holds private data) and `deny` (such calls are refused) decide by the
    flow of data, so no spelling, split or paraphrase passes; the quote detector
    (graph/policy/exfiltration.py) only says which source a call resembles. `allow` holds only
    the calls the detector finds quoting; `off` holds none.
    """

    def __init__(
        self,
        messages: Sequence[AnyMessage],
        tools: Mapping[str, BaseTool],
        mode: str,
        also_private: Sequence[str] = (),
    ) -> None:
        """Remember the thread, which tools are private and outbound, and the mode.

        `also_private`: private data in the model's context that no result carries (the
        user's memories offered with the question).
        """
        self.mode = mode
        self._also = list(also_private)
        private = {n for n, t in tools.items() if is_private(t)}
        self._guard = Guard(messages, private, {n for n, t in tools.items() if is_outbound(t)})
        self._messages, self._private = messages, private
        self._sources: list[str] | None = None

    def stops(self, call: ToolCall) -> Stopped | None:
        """Why `call` (to an outbound tool) may not simply run, or None if it may."""
        if self.mode == "off":
            return None
        if self._sources is None:
            self._sources = [*private_sources(self._messages, self._private), *self._also]
        if not self._sources:
            return None
        finding = self._guard.finding(call)
        if self.mode == "allow" and finding is None:
            return None
        return Stopped(call, self._sources, finding, self.mode)


def _listed(sources: Sequence[str]) -> str:
    shown = ", ".join(sources[:3])
    return shown + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")


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
