"""An MCP server's text reaches the terminal escaped: descriptions, results, failure reasons.

A real FastMCP server (tests/support/servers/mcp_hostile.py) describes its tool, answers and
fails with an OSC 52 clipboard write, a screen clear, an OSC 8 link, C1 controls and more;
`ferry tools`, `ferry info` and `ferry ask` run in this process on it (the config passed with
FERRY_MCP_CONFIG), plain and `--json`, and nothing a terminal would act on reaches stdout or
stderr. `--json` output still parses to the text as the server sent it.

The hostile server answers every call alike, so the in-process tests share it (`shared`); the
one that fails is started by each test, so each sees it fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.cli import main
from tests.support.cli_helpers import ferry, ferry_env
from tests.support.mcp import SERVERS, stdio_entry, write_config
from tests.support.servers.mcp_hostile import HOSTILE
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tools.mcp import close_sessions

pytestmark = pytest.mark.timeout(120)
SCRIPT = SERVERS / "mcp_hostile.py"
# Any C0 control but newline and tab, DEL, any C1 control: what a terminal would act on.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SHOWN = r"\x1b]52;c;cm0gLXJmIH4=\x07"  # the clipboard write, as printed


@pytest.fixture(scope="module")
def shared() -> Iterator[None]:
    """The hostile server's session, started by the first test and closed at the module's end
    (the same entry reuses the same session), as a process's would be at its exit."""
    yield
    close_sessions()


@pytest.fixture(autouse=True)
def hostile_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared: None) -> None:
    """FERRY_MCP_CONFIG names the hostile server, and one that fails quoting the same text."""
    servers = {
        "hostile": stdio_entry("hostile", SCRIPT, approve=False),  # its tools have no hints
        # Its own folder: an entry of this test's, so this test starts it and sees it fail.
        "dead": stdio_entry("dead", SCRIPT, args=[str(SCRIPT), "--fail"], cwd=str(tmp_path)),
    }
    monkeypatch.setenv("FERRY_MCP_CONFIG", str(write_config(tmp_path, servers, "servers.json")))


def _ferry(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    main(list(args))
    out, err = capsys.readouterr()
    assert RAW_CONTROL.findall(out) == [], out
    assert RAW_CONTROL.findall(err) == [], err
    return out, err


def test_ferry_tools_shows_a_description_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    out, err = _ferry(capsys, "tools")
    assert "page()  [mcp:hostile]" in out and SHOWN in out
    out, _ = _ferry(capsys, "tools", "--json")
    [page] = [t for t in json.loads(out)["tools"] if t["name"] == "page"]
    assert page["description"] == " ".join(f"Read the page. {HOSTILE}".split())


def test_ferry_info_shows_a_failure_reason_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    out, err = _ferry(capsys, "info")
    [dead] = [line for line in out.splitlines() if line.startswith("  dead")]
    assert "failed" in dead and SHOWN in dead
    assert "dead" in err and SHOWN in err  # the log line saying it did not start
    out, _ = _ferry(capsys, "info", "--json")
    [server] = [s for s in json.loads(out)["mcp_servers"] if s["name"] == "dead"]
    assert server["status"] == "failed" and "\x1b]52;c;" in server["reason"]


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_ferry_ask_prints_tool_results_and_errors_escaped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    with OpenAIServer() as openai:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
        monkeypatch.setenv("OPENAI_BASE_URL", openai.url + "/v1")
        monkeypatch.setenv("FERRY_MODEL", "openai:gpt-4.1-mini")
        openai.script(
            [openai_tool_calls(("page", {}), ("broken", {})), openai_answer(f"It says {HOSTILE}")]
        )
        out, err = _ferry(capsys, "ask", "read it", "--thread", "t", *["--json"] * as_json)
        openai.assert_complete()
    if as_json:
        report = json.loads(out)
        assert report["answer"] == f"It says {HOSTILE}"
        assert {c["name"]: c["status"] for c in report["tool_calls"]} == {
            "page": "success",
            "broken": "error",
        }
    else:
        assert out.startswith("It says \\x1b]52;")
        assert "✓ page" in err and "✗ broken" in err and SHOWN in err
    out, _ = _ferry(capsys, "history", "--thread", "t")
    assert f"The page says: {SHOWN}" in out
    out, _ = _ferry(capsys, "history", "--thread", "t", "--json")
    assert f"The page says: {HOSTILE}" in json.loads(out)["messages"][2]["content"]


# What each command prints is checked in this process above, plain and --json; a process adds
# Ferry's own log handler, which writes the same line for every command: two of them suffice.
@pytest.mark.parametrize("command", [("tools",), ("info", "--json")])
def test_a_ferry_process_writes_nothing_a_terminal_would_obey(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """As a process, where no test's log handler stands in for the one Ferry configures."""
    done = ferry(*command, env=ferry_env(tmp_path), cwd=tmp_path)
    assert RAW_CONTROL.findall(done.stdout) == [], done.stdout
    assert RAW_CONTROL.findall(done.stderr) == [], done.stderr
    assert "MCP server 'dead' did not start" in done.stderr and SHOWN in done.stderr
