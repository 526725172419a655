"""Control sequences in a model's answer or a tool's result reach the terminal escaped.

`ferry` runs in-process (`graph.cli.main`) against the loopback OpenAI and Open-Meteo servers;
the model answers with an OSC title change, a screen clear and a C1 CSI, and asks for the
weather in a "city" made of them, which the weather tool quotes back in its error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from graph.builder import build_graph
from graph.cli import main
from graph.core.settings import get_settings
from graph.storage import open_saver
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.servers.openmeteo import OpenMeteoServer

THREAD = "hostile-page"
CITY = "\x1b[2JAtlantis\x9b31m"
ANSWER = "Done.\x1b]0;pwned\x07 Nothing to see\x1b[2J\x1b[H\x00\x7f here."
SHOWN_ANSWER = "Done.\\x1b]0;pwned\\x07 Nothing to see\\x1b[2J\\x1b[H\\x00\\x7f here."
# Any C0 control but newline and tab, DEL, any C1 control: what a terminal would act on.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def openai() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def hostile_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], openai: OpenAIServer
) -> Iterator[tuple[str, str]]:
    """`ferry ask` on THREAD, the model scripted to emit control sequences; its stdout, stderr."""
    with OpenMeteoServer() as openmeteo:
        monkeypatch.setenv("FERRY_GEOCODING_URL", openmeteo.url + "/v1")
        monkeypatch.setenv("FERRY_FORECAST_URL", openmeteo.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
        monkeypatch.setenv("OPENAI_BASE_URL", openai.url + "/v1")
        monkeypatch.setenv("FERRY_MODEL", "openai:gpt-4.1-mini")
        openai.script([openai_tool_calls(("get_weather", {"city": CITY})), openai_answer(ANSWER)])
        assert main(["ask", "What's on this page?", "--thread", THREAD]) == 0
        openai.assert_complete()
        out, err = capsys.readouterr()
        yield out, err


def test_ask_prints_the_answer_and_tool_lines_escaped(hostile_run: tuple[str, str]) -> None:
    out, err = hostile_run

    assert RAW_CONTROL.findall(out + err) == []
    assert out == SHOWN_ANSWER + "\n"
    # json.dumps already spells ESC as \u001b in the arguments, but lets the C1 CSI through.
    assert '→ get_weather(city="\\u001b[2JAtlantis\\x9b31m")' in err.splitlines()
    assert "✗ get_weather" in err and "City '\\x1b[2JAtlantis\\x9b31m' not found" in err


def test_history_prints_escaped_and_json_and_the_store_keep_the_text(
    hostile_run: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", "--thread", THREAD]) == 0
    shown = capsys.readouterr().out
    assert RAW_CONTROL.findall(shown) == []
    assert "assistant: → get_weather(" in shown
    assert "\\x1b[2JAtlantis\\x9b31m" in shown
    assert shown.endswith(f"assistant: {SHOWN_ANSWER}\n")

    assert main(["history", "--thread", THREAD, "--json"]) == 0
    messages = json.loads(capsys.readouterr().out)["messages"]
    assert messages[1]["tool_calls"][0]["args"] == {"city": CITY}
    assert CITY in messages[2]["content"]
    assert messages[-1]["content"] == ANSWER

    with open_saver(get_settings()) as saver:
        state = build_graph(checkpointer=saver).get_state({"configurable": {"thread_id": THREAD}})
    stored = state.values["messages"]
    assert [type(m) for m in stored[1:]] == [AIMessage, ToolMessage, AIMessage]
    assert stored[1].tool_calls[0]["args"] == {"city": CITY}
    assert CITY in stored[2].content
    assert stored[-1].content == ANSWER
