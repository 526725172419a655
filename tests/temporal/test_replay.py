"""Recorded turns replay on today's workflow code: a change that would break running turns fails.

The histories under histories/ were recorded by tests/temporal/record_histories.py from real
turns (tool calls watched token by token, a decision by update, a pause decided in-process, a
pause set aside by a new question). Replaying needs no server: Temporal's `Replayer` runs the
workflow against the recorded events and fails on any command that differs.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from graph.temporal.shapes import workflow_id
from tests.temporal.helpers import replayer
from tests.temporal.test_turns import TurnWithAPause

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def _history(path: Path) -> WorkflowHistory:
    """The recorded history, under its workflow's id (a turn's thread must be its workflow's)."""
    events = json.loads(path.read_text())
    started = events["events"][0]["workflowExecutionStartedEventAttributes"]
    turn = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
    return WorkflowHistory.from_json(workflow_id(turn["thread_id"]), events)


def test_every_kind_of_turn_has_a_recorded_history() -> None:
    assert [path.stem for path in HISTORIES] == ["approved", "elsewhere", "set-aside", "tools"]


@pytest.mark.parametrize("path", HISTORIES, ids=lambda path: path.stem)
def test_a_recorded_turn_replays_on_the_workflow_as_it_is(path: Path) -> None:
    asyncio.run(replayer().replay_workflow(_history(path)))


@pytest.mark.parametrize("path", HISTORIES, ids=lambda path: path.stem)
def test_a_changed_workflow_does_not_replay_a_recorded_turn(path: Path) -> None:
    with pytest.raises(Exception, match="[Nn]ondetermin"):
        asyncio.run(replayer([TurnWithAPause]).replay_workflow(_history(path)))
