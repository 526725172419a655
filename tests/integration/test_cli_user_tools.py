"""`--tools module:ATTR`: your own tools from the command line, offline.

Each test writes a module into its folder and runs `ferry` there. Two run the installed `ferry`
console script as a process: the script's own folder, not the working one, is first on its
`sys.path`, so they show that the working folder is searched as `python -m` would search it
(and that the README's command lines work as written). The others run `ferry` in this process
(`in_process`), from a start as clean as a new process's for the folder's modules: none of
them imported, no path entry for the folder, no tools loaded.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from tests.support.cli_helpers import (
    Ferry,
    ferry_env,
    new_thread_id,
    one_json_object,
    run_command,
)
from tools.user_tools import load_user_tools

pytestmark = pytest.mark.timeout(180)
FERRY_SCRIPT = str(Path(sys.executable).parent / "ferry")
TICKETS = '''
from typing import Annotated

from langchain_core.tools import InjectedToolCallId, tool


@tool
def create_ticket(title: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Open a support ticket.

    Args:
        title: what the ticket is about.
    """
    return f"ticket opened: {title} ({tool_call_id})"


def not_a_tool(title: str) -> str:
    return title


tools = [create_ticket]
count = 3
mixed = [create_ticket, not_a_tool]
'''
ASK = 'use create_ticket with title="printer broken"'


def ferry(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """Run the console script in `tmp_path`, offline, with the tickets module beside it."""
    (tmp_path / "tickets.py").write_text(TICKETS)
    return run_command([FERRY_SCRIPT, *args], env=offline_env(tmp_path, **settings), cwd=tmp_path)


class Run(Protocol):
    """`run(*args, **settings)`: `ferry ARGS…` in the test's folder, the tickets module there."""

    def __call__(self, *args: str, **settings: str) -> subprocess.CompletedProcess[str]: ...


@pytest.fixture
def in_process(cli: Ferry, tmp_path: Path) -> Iterator[Run]:
    """`ferry` in this process, offline, in `tmp_path`; afterwards, nothing of it is left.

    What a process would end with goes: the folder's modules, its `sys.path` entry, and the
    tools loaded from it (`load_user_tools` keeps them for the life of a process).
    """
    path = list(sys.path)
    load_user_tools.cache_clear()
    assert [m for m in ("tickets", "mine", "broken") if m in sys.modules] == []

    def run(*args: str, **settings: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "tickets.py").write_text(TICKETS)
        return cli(*args, env=offline_env(tmp_path, **settings), cwd=tmp_path)

    yield run
    sys.path[:] = path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]
    load_user_tools.cache_clear()


def offline_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The offline model, and no path to the module but the working folder."""
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    env.pop("FERRY_TOOLS", None)
    env.pop("PYTHONPATH", None)
    return {**env, **settings}


def failed(done: subprocess.CompletedProcess[str], code: int, line: str) -> None:
    """The command exited `code`, printed nothing on stdout and exactly `line` on stderr."""
    assert done.returncode == code, done.stderr
    assert done.stdout == ""
    assert done.stderr == line + "\n"


def test_tools_call_runs_your_tool_and_prints_its_result(in_process: Run) -> None:
    done = in_process(
        "tools",
        "call",
        "--tools",
        "tickets:tools",
        "create_ticket",
        '{"title": "printer broken"}',
        "--json",
    )

    record = one_json_object(done)
    assert record["status"] == "ok" and record["source"] == "tickets:tools"
    assert record["result"].startswith("ticket opened: printer broken (")


def test_tools_lists_your_tool_with_its_source(in_process: Run) -> None:
    listed = one_json_object(in_process("tools", "--tools", "tickets:tools", "--json"))

    mine = [t for t in listed["tools"] if t["name"] == "create_ticket"]
    assert mine == [
        {
            "name": "create_ticket",
            "source": "tickets:tools",
            "approval": None,
            "description": "Open a support ticket. Args: title: what the ticket is about.",
            "arguments": [{"name": "title", "type": "string", "required": True}],
        }
    ]


def test_ask_offline_calls_your_tool_and_the_answer_shows_it(tmp_path: Path) -> None:
    done = ferry(tmp_path, "ask", "--tools", "tickets:tools", ASK)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("create_ticket: ticket opened: printer broken (call_")
    assert '→ create_ticket(title="printer broken")' in done.stderr


def test_ask_json_reports_the_call(in_process: Run) -> None:
    report = one_json_object(in_process("ask", "--tools", "tickets:tools", ASK, "--json"))

    assert report["stop_reason"] == "answered"
    [call] = report["tool_calls"]
    assert (call["name"], call["args"], call["status"]) == (
        "create_ticket",
        {"title": "printer broken"},
        "success",
    )
    assert report["answer"].startswith("create_ticket: ticket opened: printer broken (")


def test_ferry_tools_setting_does_what_the_option_does(in_process: Run) -> None:
    report = one_json_object(in_process("ask", ASK, "--json", FERRY_TOOLS="tickets:tools"))

    assert [c["status"] for c in report["tool_calls"]] == ["success"]


def test_your_tool_needs_approval_as_a_built_in_does_and_resume_brings_it_back(
    in_process: Run,
) -> None:
    """`FERRY_APPROVE_TOOLS` holds it; a resume without `--tools` is refused, nothing spent."""
    held = one_json_object(
        in_process(
            "ask",
            "--tools",
            "tickets:tools",
            ASK,
            "--thread",
            "t1",
            "--json",
            FERRY_APPROVE_TOOLS="create_ticket",
        )
    )
    assert held["stop_reason"] == "awaiting_approval"
    assert [c["name"] for c in held["pending_approvals"]] == ["create_ticket"]

    without = in_process("resume", "--thread", "t1", "--approve")
    failed(
        without,
        2,
        "ferry: thread t1's run calls create_ticket, not a tool here: resume it with the tools "
        "it used, --tools MODULE:ATTR (or FERRY_TOOLS), or ask on the thread to leave those "
        "calls unrun",
    )

    resumed = one_json_object(
        in_process("resume", "--thread", "t1", "--approve", "--tools", "tickets:tools", "--json")
    )
    assert resumed["stop_reason"] == "answered"
    assert [(c["name"], c["status"]) for c in resumed["tool_calls"]] == [
        ("create_ticket", "success")
    ]


def test_a_later_turn_of_a_thread_uses_your_tool_again(in_process: Run) -> None:
    first = in_process("ask", "--tools", "tickets:tools", ASK)
    thread = new_thread_id(first.stderr)

    again = in_process(
        "ask",
        "--thread",
        thread,
        "--tools",
        "tickets:tools",
        'use create_ticket with title="toner low"',
        "--json",
    )
    report = one_json_object(again)
    assert [c["args"] for c in report["tool_calls"]] == [{"title": "toner low"}]


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        (
            "nosuch:tools",
            "ferry: --tools nosuch:tools: no module named 'nosuch' in the working folder ({cwd}) "
            "or on the Python path",
        ),
        (
            "tickets:tols",
            "ferry: --tools tickets:tols: module 'tickets' has no attribute 'tols'; did you "
            "mean 'tools'?",
        ),
        (
            "tickets:count",
            "ferry: --tools tickets:count: tickets.count is an int, not a LangChain tool or a "
            "list of them (decorate a function with @tool from langchain_core.tools)",
        ),
        (
            "tickets:mixed",
            "ferry: --tools tickets:mixed: tickets.mixed[1] is a function (not_a_tool), not a "
            "LangChain tool or a list of them (decorate a function with @tool from "
            "langchain_core.tools)",
        ),
        (
            "tickets",
            "ferry: --tools tickets: expected MODULE:ATTR, a module and the list of tools in it "
            "(tickets:tools)",
        ),
    ],
)
def test_tools_that_cannot_load_are_a_usage_error_of_one_line(
    in_process: Run, tmp_path: Path, spec: str, line: str
) -> None:
    done = in_process("tools", "call", "--tools", spec, "create_ticket", "{}")

    failed(done, 2, line.format(cwd=tmp_path))


def test_a_module_that_fails_to_import_is_named_with_its_error(
    in_process: Run, tmp_path: Path
) -> None:
    (tmp_path / "broken.py").write_text("import no_such_dependency\n")

    done = in_process("ask", "--tools", "broken:tools", ASK)

    failed(
        done,
        2,
        "ferry: --tools broken:tools: importing broken failed: ModuleNotFoundError: No module "
        "named 'no_such_dependency'",
    )


def test_a_tool_named_as_a_built_in_is_refused(in_process: Run, tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from langchain_core.tools import tool\n\n\n"
        "@tool\ndef calculator(expression: str) -> str:\n"
        '    """Calculate."""\n    return expression\n'
    )

    done = in_process("ask", "--tools", "mine:calculator", "what is 2 + 2")

    failed(
        done,
        2,
        "ferry: --tools mine:calculator: tool 'calculator' has the name of a built-in tool; "
        'give yours another (@tool("my_calculator"))',
    )


def test_a_bad_ferry_tools_setting_is_a_configuration_error(
    in_process: Run, tmp_path: Path
) -> None:
    done = in_process("ask", "what is 2 + 2", FERRY_TOOLS="nosuch:tools")

    failed(
        done,
        1,
        f"ferry: FERRY_TOOLS nosuch:tools: no module named 'nosuch' in the working folder "
        f"({tmp_path}) or on the Python path",
    )


def test_on_temporal_ask_refuses_tools_the_workers_must_load(in_process: Run) -> None:
    """Nothing is contacted: the refusal comes before any connection."""
    done = in_process("ask", "--tools", "tickets:tools", ASK, FERRY_TEMPORAL_ADDRESS="127.0.0.1:9")

    failed(
        done,
        2,
        "ferry: --tools: on Temporal the workers run the tools, not this command; start them "
        "with ferry worker --tools tickets:tools (or FERRY_TOOLS), and ask without --tools",
    )


def test_the_readme_example_runs_keyless_from_the_command_line(tmp_path: Path) -> None:
    """The README's `tickets.py`, saved as it says, and its `--tools` command lines, as written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Your own tools") :]
    module = section.split("```python\n", 1)[1].split("\n```", 1)[0]
    shell = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    lines = [shlex.split(line)[1:] for line in shell.splitlines()]
    assert [line[:3] for line in lines] == [
        ["ask", "--tools", "tickets:tools"],
        ["tools", "call", "--tools"],
    ]
    (tmp_path / "tickets.py").write_text(module)
    env = offline_env(tmp_path)

    asked, called = (run_command([FERRY_SCRIPT, *line], env=env, cwd=tmp_path) for line in lines)

    assert asked.returncode == 0 and called.returncode == 0, asked.stderr + called.stderr
    assert asked.stdout.startswith("create_ticket: ticket opened: printer broken (call_")
    assert called.stdout.startswith("ticket opened: printer broken (call_")
