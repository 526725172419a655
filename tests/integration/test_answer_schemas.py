"""Answers in a schema through the doors users take: each provider's real client against its
emulator (what goes on the wire, and a history each accepts), and `ferry ask --schema`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from graph import build_graph
from graph.storage import sqlite_saver
from tests.support.cli_helpers import Ferry, ferry_env, one_json_object, succeeded
from tests.support.lookup import CALLS, lookup
from tests.support.providers import PROVIDERS, Provider
from tests.support.servers.openai import OpenAIServer, openai_tool_calls
from tests.support.servers.openmeteo import OpenMeteoServer
from tests.support.servers.scripted import ScriptedServer
from tests.support.turns import ask


class Found(BaseModel):
    """What was looked up."""

    key: str
    value: int


SUM = {
    "title": "Sum",
    "type": "object",
    "properties": {"total": {"type": "integer"}},
    "required": ["total"],
}


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def provider(request: pytest.FixtureRequest) -> Provider:
    provider: Provider = request.param
    return provider


@pytest.fixture
def server(provider: Provider) -> Iterator[ScriptedServer]:
    CALLS.clear()
    with provider.server() as running:
        yield running
    assert running.rejections == [], running.rejections  # every history was a valid one


def tool_choice(provider: Provider, request: dict[str, Any]) -> Any:
    return request["tool_choice"]


def test_a_tool_then_a_corrected_answer_then_a_turn_in_words(
    provider: Provider, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(
        [
            provider.tool_calls(("lookup", {"key": "a"})),
            provider.tool_calls(("Found", {"key": "a", "value": "one"})),
            provider.tool_calls(("Found", {"key": "a", "value": 1})),
            provider.answer("It was 1."),
        ]
    )
    graph = build_graph(
        model=provider.model(server),
        tools=[lookup],
        checkpointer=sqlite_saver(tmp_path / "db"),
        response_format=Found,
    )
    result = ask(graph, "look up a")
    assert result["structured_response"] == {"key": "a", "value": 1}
    assert result["stop_reason"] == "answered"
    assert CALLS == ["a"]

    first, _, third = provider.requests(server)[:3]
    # The answer tool goes beside the tools, with the schema's fields, and a call is required.
    assert provider.tool_names(first) == ["lookup", "Found"]
    assert tool_choice(provider, first) in ("required", {"type": "any"})
    sent_back = [i for i in provider.transcript(third) if i.kind == "tool_result"][-1]
    assert "value: Input should be a valid integer" in sent_back.text
    assert sent_back.is_error in (True, None)  # OpenAI's wire format has no error flag

    # The next turn, with no schema, sends the whole history back: the provider accepts it.
    words = build_graph(
        model=provider.model(server), tools=[lookup], checkpointer=sqlite_saver(tmp_path / "db")
    )
    assert ask(words, "and in words?")["messages"][-1].text == "It was 1."
    kinds = [i.kind for i in provider.transcript(provider.requests(server)[3])]
    assert kinds == [
        "user", "tool_use", "tool_result", "tool_use", "tool_result", "tool_use", "tool_result",
        "user",
    ]  # fmt: skip


# --- ferry ask --schema -----------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    with OpenMeteoServer() as weather:
        yield ferry_env(tmp_path, weather=weather, FERRY_MODEL="offline")


def test_stdout_is_the_answer_as_json_and_nothing_else(
    cli: Ferry, tmp_path: Path, env: dict[str, str]
) -> None:
    (tmp_path / "sum.json").write_text(json.dumps(SUM))

    done = succeeded(cli("ask", "what is 150 * 3", "--schema", "sum.json", env=env, cwd=tmp_path))

    assert json.loads(done.stdout) == {"total": 450}
    assert "✓ calculator" in done.stderr  # progress still goes to stderr


def test_json_has_the_answer_as_output(cli: Ferry, tmp_path: Path, env: dict[str, str]) -> None:
    done = cli("ask", "what is 2 + 3", "--schema", json.dumps(SUM), "--json", env=env, cwd=tmp_path)
    report = one_json_object(done)

    assert done.returncode == 0
    assert report["output"] == {"total": 5}
    assert report["stop_reason"] == "answered"
    assert [c["name"] for c in report["tool_calls"]] == ["calculator"]  # the answer is no tool
    plain = one_json_object(cli("ask", "what is 2 + 3", "--json", env=env, cwd=tmp_path))
    assert plain["output"] is None


def test_no_matching_answer_exits_1_with_one_line(
    cli: Ferry, tmp_path: Path, env: dict[str, str]
) -> None:
    never = {"title": "Code", "type": "object", "properties": {"code": {"pattern": "^z+$"}}}

    done = cli("ask", "what is 2 + 3", "--schema", json.dumps(never), env=env, cwd=tmp_path)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.endswith(
        "ferry: no answer matched the schema (stop_reason: invalid_output)\n"
    )
    as_json = cli(
        "ask", "what is 2 + 3", "--schema", json.dumps(never), "--json", env=env, cwd=tmp_path
    )
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 1
    assert report["stop_reason"] == "invalid_output" and report["output"] is None


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ('{"type": "array"}', 'the answer schema must describe an object ("type": "object")'),
        (
            '{"type": "object", "required": 3}',
            'the answer schema is not a valid JSON schema: 3 is not of type "array"',
        ),
        ("missing.json", "cannot read missing.json: No such file or directory"),
        ("{not json", "the answer schema is not JSON: Expecting property name"),
    ],
)
def test_a_schema_that_cannot_work_is_a_usage_error_and_nothing_is_stored(
    cli: Ferry, tmp_path: Path, env: dict[str, str], schema: str, says: str
) -> None:
    done = cli("ask", "what is 2 + 3", "--schema", schema, env=env, cwd=tmp_path)

    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"ferry: --schema: {says}")
    assert not (tmp_path / "ferry.db").exists()


def test_a_schema_answer_on_an_openai_model_over_the_cli(cli: Ferry, tmp_path: Path) -> None:
    with OpenAIServer() as model:
        model.script([openai_tool_calls(("Sum", {"total": 12}))])
        env = ferry_env(tmp_path, model=model)

        done = succeeded(cli("ask", "6 + 6?", "--schema", json.dumps(SUM), env=env, cwd=tmp_path))

        assert json.loads(done.stdout) == {"total": 12}
        [request] = model.chat_requests()
        assert request["tool_choice"] == "required"
        [answer_tool] = [t for t in request["tools"] if t["function"]["name"] == "Sum"]
        assert answer_tool["function"]["parameters"]["properties"] == SUM["properties"]
