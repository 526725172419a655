"""`tools.user_tools`: what a `module:ATTR` may name, and the offline model calling such a tool."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from graph.models.offline import Intent, named_call
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


def test_the_working_folder_is_searched_only_for_a_module_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    folder = tmp_path / "untrusted"
    folder.mkdir()
    (folder / "h2.py").write_text("raise SystemExit('imported from the folder')\n")
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(folder))])

    load_user_tools((f"{module}:create_ticket",), frozenset())  # installed elsewhere

    assert str(folder) not in sys.path and "" not in sys.path


def test_a_module_that_exits_or_names_a_tool_badly_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"odd_{uuid.uuid4().hex}"
    (tmp_path / f"{name}_exits.py").write_text("raise SystemExit(3)\n")
    (tmp_path / f"{name}_spaced.py").write_text(
        "from langchain_core.tools import tool\n\n\n"
        '@tool("get weather")\ndef w(city: str) -> str:\n    """Weather."""\n    return city\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserToolsError, match="importing .*_exits failed: SystemExit"):
        load_user_tools((f"{name}_exits:tools",), frozenset())
    with pytest.raises(UserToolsError, match="tool name 'get weather' is not 1 to 64 letters"):
        load_user_tools((f"{name}_spaced:w",), frozenset())
