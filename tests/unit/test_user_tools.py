"""`tools.user_tools`: what a `module:ATTR` may name, and the offline model calling such a tool."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from graph.models.planner import Intent, named_call
from tools.user_tools import UserToolsError, load_user_tools, tool_specs

MODULE = '''
from langchain_core.tools import tool


@tool
def create_ticket(title: str) -> str:
    """Open a support ticket."""
    return title


as_tuple = (create_ticket,)
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new module of tools on `sys.path`, with a name of its own (modules are cached)."""
    name = f"tickets_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_one_tool_a_tuple_and_a_tool_named_twice_give_each_tool_once(module: str) -> None:
    loaded = load_user_tools((f"{module}:create_ticket", f"{module}:as_tuple"), frozenset())

    assert [t.name for t in loaded] == ["create_ticket"]
    assert (loaded[0].metadata or {})["source"] == f"{module}:create_ticket"


def test_a_reserved_name_is_refused(module: str) -> None:
    with pytest.raises(UserToolsError, match="has the name of a built-in tool"):
        load_user_tools((f"{module}:as_tuple",), frozenset({"create_ticket"}))


def test_a_setting_s_entries_are_read_in_order_once_each() -> None:
    assert tool_specs(" a:x, b:y ,,a:x") == ("a:x", "b:y")
    assert tool_specs(["a:x", "b:y"]) == ("a:x", "b:y")


@pytest.mark.parametrize(
    "question",
    [
        'use create_ticket with title="printer broken"',
        'create_ticket title="printer broken"',
        'call create_ticket {"title": "printer broken"}',
    ],
)
def test_the_offline_planner_calls_a_tool_named_in_the_question(question: str) -> None:
    called = named_call(question, ("create_ticket",))

    assert called == Intent("create_ticket", {"title": "printer broken"})
