"""Asking the person at the terminal to approve, edit, reject or answer held tool calls."""

from __future__ import annotations

import json
import sys
from typing import Any

from graph.core.controls import printable

CHOICES = {"approve": "[a]pprove", "edit": "[e]dit", "reject": "[r]eject", "respond": "re[s]pond"}
_KEYS = {"a": "approve", "e": "edit", "r": "reject", "s": "respond"}


def ask_decisions(pending: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask the person at the terminal to decide each pending call; the resume value."""
    decisions = []
    for call in pending:
        if call.get("description"):  # why a guard held it
            sys.stderr.write(printable(call["description"]) + "\n")
        decision = None
        while decision is None:
            decision = _ask_one(call)
        decisions.append(decision)
    return {"decisions": decisions}


def _ask_one(call: dict[str, Any]) -> dict[str, Any] | None:
    """One decision on `call`, among those it allows; None to ask again."""
    allowed = call.get("allowed_decisions") or list(CHOICES)
    shown = f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})"
    options = " / ".join(CHOICES[d] for d in CHOICES if d in allowed)
    choice = input(printable(f"approve {shown}? {options}: ")).strip().lower()
    picked = _KEYS.get(choice[:1])
    if picked not in allowed:
        return None
    if picked == "approve":
        return {"type": "approve"}
    if picked == "reject":
        return {"type": "reject", "message": input("reason: ").strip()}
    if picked == "respond":
        return {"type": "respond", "message": input("the result to give the model: ")}
    try:
        args = json.loads(input("new arguments (JSON object): "))
    except json.JSONDecodeError as exc:
        sys.stderr.write(f"not JSON: {exc}\n")
        return None
    if not isinstance(args, dict):
        sys.stderr.write("arguments must be a JSON object\n")
        return None
    return {"type": "edit", "edited_action": {"name": call["name"], "args": args}}
