"""The exfiltration matcher: which outbound arguments quote file content read earlier."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import tool

from graph.cli.agent import ask_decisions
from graph.core.settings import Settings
from graph.policy import quotes
from graph.policy.approval import gate
from graph.policy.exfiltration import Guard, is_outbound, is_private
from tools import TOOLS

FILE = (
    "notes.txt: lines 1-4 of 4\n"
    "Shopping: milk, eggs, bread\n"
    "The door code is 7391-ALPHA-omega-22, do not share it.\n"
    "hunter2-pass\n"
    "ok\n"
)


def read(content: str, call_id: str = "r1", name: str = "read_file", **extra: Any) -> list[Any]:
    """A read and its result, as they sit in a thread."""
    call = ToolCall(name=name, args={"path": "notes.txt"}, id=call_id, type="tool_call")
    return [
        AIMessage("", tool_calls=[call], id=f"a-{call_id}"),
        ToolMessage(content, tool_call_id=call_id, name=name, id=f"t-{call_id}", **extra),
    ]


def search(**args: Any) -> ToolCall:
    return ToolCall(name="web_search", args=args, id="s1", type="tool_call")


def quote(messages: list[Any], call: ToolCall) -> str | None:
    finding = Guard(messages, {"read_file"}).finding(call)
    return None if finding is None else finding.fragment


def thread(content: str = FILE) -> list[Any]:
    return [HumanMessage("hi", id="h"), *read(content)]


PROSE = "".join(random.Random(0).choices(string.ascii_lowercase, k=300))  # no tokens in it


def test_20_consecutive_characters_are_a_quote_and_19_are_not() -> None:
    assert quote(thread(PROSE), search(query=f"about {PROSE[10:30]}")) == PROSE[10:30]
    assert quote(thread(PROSE), search(query=f"x{PROSE[5:60]}y")) == PROSE[5:60]  # all of it
    assert quote(thread(PROSE), search(query=f"about {PROSE[10:29]}")) is None


def test_whitespace_does_not_count() -> None:
    spaced = " ".join(PROSE[40:60])
    assert quote(thread(PROSE), search(query=spaced)) == PROSE[40:60]


@pytest.mark.parametrize("offset", range(17))
def test_a_quote_is_found_wherever_it_starts(offset: int) -> None:
    text = "".join(random.Random(offset).choices(string.ascii_lowercase, k=300))
    fragment = text[100 + offset : 120 + offset]
    assert quote(thread(text), search(query=f"x {fragment} y")) == fragment


def test_16_characters_of_a_token_are_a_quote_and_15_are_not() -> None:
    key = "sk-proj-7f3Kq9ZxW2mB8vLr4TnYc6Hd"
    content = f"OPENAI_API_KEY={key}\nsome words\n"
    assert quote(thread(content), search(query=f"is {key[10:26]} valid")) == key[10:26]
    assert quote(thread(content), search(query=f"is {key[10:25]} valid")) is None
    # Not a token: no digits, or too little variety.
    words = "internationalization aaaa1111aaaa1111aaaa\n"
    assert quote(thread(words), search(query="internationalizat")) is None
    assert quote(thread(words), search(query="a1111aaaa1111aaa")) is None


def test_case_and_whitespace_do_not_hide_a_quote() -> None:
    rewrapped = "SHOPPING:   MILK, eggs,\tbread THE DOOR"
    assert quote(thread(), search(query=rewrapped)) == "Shopping: milk, eggs, bread The door"


def test_a_whole_line_of_ten_characters_or_more_counts() -> None:
    assert quote(thread(), search(query="is hunter2-pass safe?")) == "hunter2-pass"
    assert quote(thread(), search(query="ok")) is None
    assert quote(thread("----------\n"), search(query="a ---------- b")) is None  # no letters


def test_every_argument_is_checked_nested_ones_included() -> None:
    call = search(query="weather", options={"tags": ["x", "The door code is 7391-ALPHA"]})
    assert quote(thread(), call) == "The door code is 7391-ALPHA"


def test_only_successful_results_of_private_tools_are_sources() -> None:
    line = "The door code is 7391-ALPHA-omega-22"
    call = search(query=line)
    assert quote([*read(line, name="web_search")], call) is None
    assert quote([*read(line, status="error")], call) is None
    assert quote([*read(line)], call) == line


def test_the_finding_names_the_file_and_explains_itself() -> None:
    call = search(query="so: code is 7391-ALPHA-omega-22, do")
    finding = Guard(thread(), {"read_file"}).finding(call)
    assert finding is not None and finding.source == "read_file(notes.txt)"
    assert finding.description().startswith(
        "Held by the exfiltration guard: web_search would send text that read_file(notes.txt) "
        "returned earlier (“code is 7391-ALPHA-omega-22, do”) off this machine."
    )


def test_no_result_is_left_out_however_much_was_read(monkeypatch: pytest.MonkeyPatch) -> None:
    old_line = "an old secret line that nobody should send anywhere"
    fillers = ["".join(random.Random(n).choices(string.ascii_letters, k=200_000)) for n in range(4)]
    messages = [*read(old_line, "r1")]
    for n, filler in enumerate(fillers, start=2):
        messages += read(filler, f"r{n}")
    monkeypatch.setattr(quotes, "_INDEXES", quotes._Indexes(budget=100_000))  # holds one
    for _ in range(2):  # the second time, the first index was evicted: built again
        assert quote(messages, search(query=fillers[-1][-40:])) == fillers[-1][-40:]
        assert quote(messages, search(query=old_line)) == old_line


def test_a_long_file_is_matched_through_its_index() -> None:
    big = "".join(random.Random(2).choices(string.ascii_letters + " ", k=400_000))
    messages = thread(big)
    Guard(messages, {"read_file"}).finding(search(query="warm-up"))  # builds the cached index
    query = "".join(random.Random(3).choices(string.ascii_letters, k=300))
    for _ in range(20):
        assert Guard(messages, {"read_file"}).finding(search(query=query)) is None
    # Its speed is measured by hand, not asserted here: about 0.5 ms a call, against 17 ms for
    # scanning the text for each 24-character window.


def test_outbound_and_private_tools_are_declared_by_metadata() -> None:
    by_name = {t.name: t for t in TOOLS}
    assert [name for name, t in by_name.items() if is_outbound(t)] == ["web_search", "get_weather"]
    assert [name for name, t in by_name.items() if is_private(t)] == ["read_file"]

    @tool
    def mailbox(folder: str) -> str:
        """Read mail.

        Args:
            folder: which folder.
        """
        return folder

    mailbox.metadata = {"private": True}
    assert is_private(mailbox)


def test_only_outbound_calls_are_gated() -> None:
    messages: list[AnyMessage] = thread()
    quoting = "The door code is 7391-ALPHA-omega-22"
    calls = [
        ToolCall(name="calculator", args={"expression": quoting}, id="c1", type="tool_call"),
        ToolCall(name="get_weather", args={"city": quoting}, id="w1", type="tool_call"),
    ]
    tools = {t.name: t for t in TOOLS}
    held = gate(calls, messages=messages, tools=tools, settings=Settings(), can_approve=True)
    assert [c["id"] for c in held.held] == ["w1"] and held.refused == []
    assert list(held.reasons) == ["w1"]
    off = Settings(exfiltration_guard="off")
    assert gate(calls, messages=messages, tools=tools, settings=off, can_approve=False).held == []


def test_the_terminal_prompt_shows_why_a_call_is_held(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("builtins.input", lambda prompt="": "r")
    why = "Held by the exfiltration guard: web_search would send text that read_file(notes.txt)"
    pending = [{"id": "s1", "name": "web_search", "args": {"query": "x"}, "description": why}]
    assert ask_decisions(pending) == {"decisions": [{"type": "reject", "message": "r"}]}
    assert capsys.readouterr().err == why + "\n"
