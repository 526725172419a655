"""LangChain's human-in-the-loop format, as `HumanInTheLoopMiddleware` raises and reads it.

The shapes mirror `langchain.agents.middleware.human_in_the_loop` (langchain is not a runtime
dependency): a pause's value is a `HITLRequest`, one action request and one review config per
held call, and the resume value is a `HITLResponse`, one decision per held call, by position.
Each action request also carries the call's `tool_call_id` (and its description names it), so a
person can tell two similar calls apart.

Threads paused before this format still resume with the older decisions, translated here:

    {"<tool_call_id>": {"action": "approve" | "edit" | "reject", "args": ..., "reason": ...}}
    {"action": "approve" | "reject", "reason": ...}  # one decision for every held call
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NotRequired, cast, get_args

from typing_extensions import TypedDict

if TYPE_CHECKING:
    from langchain_core.messages import ToolCall

DecisionType = Literal["approve", "edit", "reject", "respond"]
ALL_DECISIONS: tuple[DecisionType, ...] = get_args(DecisionType)
"""Every decision the format knows (the middleware's)."""
DEFAULT_DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject")
"""What a person may decide when `FERRY_APPROVE_TOOLS` lists no decisions for the tool:
`respond` only when the tool's entry names it, since agent-chat-ui offers no button for it."""
PREFIX = "Tool execution requires approval"
"""The description's first paragraph when no guard gives a reason (the middleware's)."""


class Action(TypedDict):
    """A tool call as a person edited it."""

    name: str
    args: dict[str, Any]


class ActionRequest(TypedDict):
    """One held call, as shown to the person deciding."""

    name: str
    args: dict[str, Any]
    description: NotRequired[str]
    tool_call_id: NotRequired[str]
    """Ferry's addition: which call this is."""


class ReviewConfig(TypedDict):
    """The decisions allowed for one held call."""

    action_name: str
    allowed_decisions: list[DecisionType]


class HITLRequest(TypedDict):
    """The value of an approval pause."""

    action_requests: list[ActionRequest]
    review_configs: list[ReviewConfig]


class Decision(TypedDict):
    """One person's decision: `approve`, `edit` (`edited_action`), `reject` or `respond`."""

    type: DecisionType
    edited_action: NotRequired[Action]
    message: NotRequired[str]


class ApprovalDecisionError(ValueError):
    """A resume value that does not decide the held calls."""


def describe(call: ToolCall, reason: str | None = None, error: str | None = None) -> str:
    """The description a person reads: why the call is held, then the call itself and its id.

    `error` (first, when given) says why the last decision sent was refused.
    """
    args = json.dumps(call["args"], ensure_ascii=False, default=str)
    why = f"{error}\n\n{reason or PREFIX}" if error else reason or PREFIX
    return f"{why}{_CALL}{call['name']}\nArgs: {args}\nTool call id: {call['id']}"


_CALL = "\n\nTool: "


def reason_of(request: Mapping[str, Any]) -> str | None:
    """Why the call is held (and an earlier decision refused), from its description.

    None for an ordinary approval, whose description says nothing `name` and `args` do not.
    """
    head = str(request.get("description") or "").rsplit(_CALL, 1)[0]
    return head if head and head != PREFIX else None


def request(
    calls: Sequence[ToolCall],
    reasons: Mapping[str, str],
    allowed: Mapping[str, Sequence[DecisionType]],
    error: str | None = None,
) -> HITLRequest:
    """The pause's value for `calls` (`reasons` and `allowed` by tool call id)."""
    return HITLRequest(
        action_requests=[
            ActionRequest(
                name=c["name"],
                args=c["args"],
                description=describe(c, reasons.get(c["id"] or ""), error),
                tool_call_id=c["id"] or "",
            )
            for c in calls
        ],
        review_configs=[
            ReviewConfig(
                action_name=c["name"],
                allowed_decisions=list(allowed.get(c["id"] or "", DEFAULT_DECISIONS)),
            )
            for c in calls
        ],
    )


def awaiting(value: Any) -> list[dict[str, Any]]:
    """The calls a pause's value holds, in order: `id`, `name`, `args`, `allowed_decisions`.

    Reads both this format and the older `{"pending_approvals": [...]}`; `description` is kept
    only when a guard gave a reason.
    """
    if not isinstance(value, dict):
        return []
    if "pending_approvals" in value:
        return [
            {**p, "allowed_decisions": list(DEFAULT_DECISIONS)} for p in value["pending_approvals"]
        ]
    requests, configs = value.get("action_requests") or [], value.get("review_configs") or []
    found = []
    for asked, config in zip(requests, configs, strict=False):
        entry = {"id": asked.get("tool_call_id"), "name": asked["name"], "args": asked["args"]}
        if reason := reason_of(asked):
            entry["description"] = reason
        found.append({**entry, "allowed_decisions": list(config["allowed_decisions"])})
    return found


def decisions_for(resume: Any, calls: Sequence[ToolCall]) -> list[Decision]:
    """One decision per call, from a `{"decisions": [...]}` resume or an older shape.

    Raises:
        ApprovalDecisionError: the value is malformed or does not decide every call.
    """
    if isinstance(resume, dict) and "decisions" in resume:
        given = resume["decisions"]
        if not isinstance(given, list) or len(given) != len(calls):
            count = len(given) if isinstance(given, list) else "no list of"
            raise ApprovalDecisionError(
                f"{count} decisions for {len(calls)} tool calls awaiting approval: send one "
                "per call, in the order of `action_requests`"
            )
        return [_checked(d, c) for d, c in zip(given, calls, strict=True)]
    if isinstance(resume, dict) and "action" in resume:
        return [_older(resume, c) for c in calls]
    if isinstance(resume, dict):
        no_decision = {"action": "reject", "reason": "no decision"}
        return [_older(resume.get(c["id"]) or no_decision, c) for c in calls]
    raise ApprovalDecisionError(
        "resume with {'decisions': [...]}, one decision per call awaiting approval; "
        f"got {resume!r}"
    )


def _older(old: Any, call: ToolCall) -> Decision:
    """A decision in the older shape, as a decision of this format."""
    action = old.get("action") if isinstance(old, dict) else None
    if action == "edit":
        edited = {"name": call["name"], "args": old.get("args")}
        return _checked({"type": "edit", "edited_action": edited}, call)
    if action == "reject":
        return Decision(type="reject", message=str(old.get("reason") or "no reason given"))
    return _checked({"type": action}, call)


def _checked(decision: Any, call: ToolCall) -> Decision:
    """`decision` if it is well formed for `call`."""
    where = f"tool call {call['id']} ({call['name']})"
    kind = decision.get("type") if isinstance(decision, dict) else None
    if kind not in ALL_DECISIONS:
        raise ApprovalDecisionError(
            f"{where}: a decision is an object whose `type` is one of {', '.join(ALL_DECISIONS)};"
            f" got {decision!r}"
        )
    if kind == "edit":
        edited = decision.get("edited_action")
        if not isinstance(edited, dict) or not isinstance(edited.get("args"), dict):
            raise ApprovalDecisionError(
                f"{where}: an edit needs `edited_action` with `name` and `args` (an object)"
            )
        if edited.get("name", call["name"]) != call["name"]:
            raise ApprovalDecisionError(
                f"{where}: an edit may change the arguments, not the tool "
                f"({edited.get('name')!r}); reject the call instead"
            )
    if kind == "respond" and not isinstance(decision.get("message"), str):
        raise ApprovalDecisionError(f"{where}: a `respond` decision needs a `message` (text)")
    return cast(Decision, decision)
