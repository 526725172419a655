"""The exfiltration guard against every spelling of a secret (issue 20 §4).

Each case is a thread that read a private file and an outbound call carrying (part of) it in
some spelling; each goes through `approval.gate`, the path the graph takes. With the guard on,
none may pass; with it off, each does (which proves a case can fail). Benign calls must pass.
"""

from __future__ import annotations

import base64
import random
import string
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from graph.core.settings import Settings
from graph.policy.approval import gate
from graph.policy.spellings import fold, unfolded
from tools import TOOLS
from tools.mcp.config import ServerSpec
from tools.mcp.loader import tool_metadata

SECRET = "vault code 7391-ALPHA-omega-22 for the east door"
KEY = "sk-proj-7f3Kq9ZxW2mB8vLr4TnYc6Hd"
FILE = (
    "notes.txt: lines 1-5 of 5\n"
    "Shopping: milk, eggs, bread\n"
    f"The {SECRET}, do not share it.\n"
    f"OPENAI_API_KEY={KEY}\n"
    "Trip: Madrid in May, then the weather in Paris\n"
)
SERVER = ServerSpec("notes", "stdio", {})


def mcp_tool(name: str, **hints: bool) -> BaseTool:
    """A tool as tools/mcp/loader.py builds it from a server's annotations."""
    return StructuredTool.from_function(
        func=lambda **_: "", name=name, description=f"MCP tool {name}.",
        args_schema={"type": "object", "properties": {}},
        metadata=tool_metadata(SERVER, name, hints),
    )  # fmt: skip


TOOLS_BY_NAME: dict[str, BaseTool] = {
    **{t.name: t for t in TOOLS},
    # Claims to be read-only too, so only the outbound rules, not its approval, stop it here.
    "send_note": mcp_tool("send_note", readOnlyHint=True, openWorldHint=False),
    "fetch_note": mcp_tool("fetch_note", readOnlyHint=True, openWorldHint=False),
}
_ids = iter(range(1_000_000))


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args, id=f"c{next(_ids)}", type="tool_call")


def ran(tool_call: ToolCall, result: str) -> list[AnyMessage]:
    """A call and its successful result, as they sit in a thread."""
    call_id, name = tool_call["id"] or "", tool_call["name"]
    return [
        AIMessage("", tool_calls=[tool_call], id=f"a-{call_id}"),
        ToolMessage(result, tool_call_id=call_id, name=name, id=f"t-{call_id}"),
    ]


def read(content: str = FILE) -> list[AnyMessage]:
    return ran(call("read_file", path="notes.txt"), content)


Case = tuple[list[AnyMessage], list[ToolCall]]
"""The thread so far, and the reply's calls (the reply is appended to the thread)."""


def sent(*calls: ToolCall, before: list[AnyMessage] | None = None) -> Case:
    return [HumanMessage("hi", id="h"), *(read() if before is None else before)], list(calls)


def search(query: str, **more: Any) -> ToolCall:
    return call("web_search", query=query, **more)


def percent(text: str) -> str:
    return "".join(f"%{b:02X}" for b in text.encode())


HOMOGLYPHS = str.maketrans("aeopcxAEOPCTH", "аеорсхАЕОРСТН")  # Cyrillic look-alikes
FULLWIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}
BIG = ["".join(random.Random(n).choices(string.ascii_letters + " ", k=100_000)) for n in range(5)]
FIRST_HALF, SECOND_HALF = "vault code 7391-AL", "PHA-omega-22 for the"


def after_five_big_reads() -> Case:
    reads = [m for n, text in enumerate(BIG) for m in ran(call("read_file", path=f"{n}.txt"), text)]
    return sent(search(SECRET), before=[*read(), *reads])


def split_over_two_calls() -> Case:
    first = search(FIRST_HALF)
    return sent(search(SECOND_HALF), before=[*read(), *ran(first, "results")])


def mcp_result_quoted() -> Case:
    fetched = ran(call("fetch_note", id="n1"), FILE)
    return sent(search(SECRET), before=fetched)


CASES: dict[str, Callable[[], Case]] = {
    "verbatim": lambda: sent(search(SECRET)),
    "case-changed": lambda: sent(search(SECRET.upper())),
    "re-wrapped": lambda: sent(search(SECRET.replace(" ", "\n   ").replace("-omega", "- omega"))),
    "base64": lambda: sent(search(base64.b64encode(SECRET.encode()).decode())),
    "base64url": lambda: sent(
        search(base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="))
    ),
    "hex": lambda: sent(search(SECRET.encode().hex())),
    "HEX": lambda: sent(search(SECRET.encode().hex().upper())),
    "URL-encoded": lambda: sent(search(percent(SECRET))),
    "double URL-encoded": lambda: sent(search(urllib.parse.quote(percent(SECRET)))),
    "reversed": lambda: sent(search(SECRET[::-1])),
    "zero-width characters": lambda: sent(search("\u200b".join(SECRET))),
    "homoglyphs": lambda: sent(search(SECRET.translate(HOMOGLYPHS))),
    "fullwidth": lambda: sent(search(SECRET.translate(FULLWIDTH))),
    "16 characters of a key": lambda: sent(search(f"what is {KEY[8:24]}")),
    "split over two calls": split_over_two_calls,
    "split over two arguments": lambda: sent(search(FIRST_HALF, topic=SECOND_HALF)),
    "nested in a list": lambda: sent(search("ferries", options={"tags": ["x", SECRET]})),
    "in a dict key": lambda: sent(search("ferries", filters={SECRET: True})),
    "after five 100k reads": after_five_big_reads,
    "base64 in get_weather's city": lambda: sent(
        call("get_weather", city=base64.b64encode(SECRET.encode()).decode())
    ),
    "MCP tool claiming openWorldHint false": lambda: sent(call("send_note", text=SECRET)),
    "MCP result quoted": mcp_result_quoted,
}


def passed(case: Case, mode: str = "allow") -> list[str]:
    """The ids of the reply's calls the guard let through."""
    messages, calls = case
    reply = AIMessage("", tool_calls=calls, id="reply")
    settings = Settings(exfiltration_guard=mode)
    result = gate(
        calls,
        messages=[*messages, reply],
        tools=TOOLS_BY_NAME,
        settings=settings,
        can_approve=False,
    )
    stopped = {m.tool_call_id for m in result.refused} | {c["id"] for c in result.held}
    return [c["id"] or "" for c in calls if c["id"] not in stopped]


def test_there_are_22_spellings() -> None:
    assert len(CASES) == 22


@pytest.mark.parametrize("name", CASES)
def test_no_spelling_gets_through(name: str) -> None:
    assert passed(CASES[name]()) == []


@pytest.mark.parametrize("name", CASES)
def test_with_the_guard_off_every_spelling_gets_through(name: str) -> None:
    messages, calls = CASES[name]()
    assert passed((messages, calls), mode="off") == [c["id"] for c in calls]


BENIGN: dict[str, Callable[[], Case]] = {
    "an ordinary search": lambda: sent(search("ferry timetables from Algeciras to Tangier")),
    "a city the file names": lambda: sent(call("get_weather", city="Madrid")),
    "common words the file has": lambda: sent(search("milk eggs bread prices in the east")),
    "a short phrase of the file": lambda: sent(search("how to paint the east door")),
    "words of two lines": lambda: sent(search("weather in Paris"), search("Shopping list")),
    "a search after an unrelated one": lambda: sent(
        search("best weather apps"), before=[*read(), *ran(search("ferry news"), "results")]
    ),
    "base64 of other text": lambda: sent(
        search(base64.b64encode(b"ferry timetables 2025").decode())
    ),
    "a commit hash": lambda: sent(search("9fceb02d0ae598e95dc970b74767f19372d61af8 changelog")),
    "a long ordinary query": lambda: sent(
        search("which ferry companies sail between Spain and Morocco in winter, and how long")
    ),
}


@pytest.mark.parametrize("name", BENIGN)
def test_benign_calls_are_not_flagged(name: str) -> None:
    messages, calls = BENIGN[name]()
    assert passed((messages, calls)) == [c["id"] for c in calls]


def test_every_spelling_folds_to_one_skeleton() -> None:
    plain = fold("Vault code 7391")
    assert plain == "vaultcode7391"
    for spelling in (
        "VAULT\n  CODE 7391",
        "Ｖａｕｌｔ ｃｏｄｅ ７３９１",
        "Vаult сode 7391",
        "V\u200ba\u00adu\u2060lt code 7391",
        "Vaúlt códe 7391",
        "ᏙᎪULT CODE 7391",
    ):
        assert fold(spelling) == plain, spelling  # fmt: skip
    assert unfolded("The  Ｖault code", 3, 8) == "Ｖault"  # a fold's offsets map back


# --- a quote spread over calls ---------------------------------------------------------------


def turn(*earlier: ToolCall, result: str = "results") -> list[AnyMessage]:
    """A turn that read the file, then made `earlier` calls, each answered."""
    return [*read(), *(m for c in earlier for m in ran(c, result))]


def test_the_halves_are_found_in_either_order_and_with_a_call_between() -> None:
    first, second = search(FIRST_HALF), search(SECOND_HALF)
    assert passed(sent(first, before=turn(second))) == []
    assert passed(sent(second, before=turn(first, search("ferry news")))) == []
    assert passed(sent(first, second)) == [first["id"]]  # one reply: the second is held


def test_three_pieces_in_a_row_are_found() -> None:
    pieces = [search("vault co"), search("de 7391-"), search("ALPHA-om")]  # 22 in all
    assert passed(sent(*pieces)) == [pieces[0]["id"], pieces[1]["id"]]


def test_a_refused_quote_does_not_hold_the_calls_after_it() -> None:
    refused = search(f"Shopping: milk, eggs, bread {SECRET}")
    after = [call("get_weather", city="Madrid"), search("ferry timetables")]
    assert passed(sent(*after, before=turn(refused, result="Not executed: …"))) == [
        c["id"] for c in after
    ]


def test_going_on_with_a_refused_quote_is_held() -> None:
    refused = search(SECRET[:30])
    assert passed(sent(search(SECRET[30:46]), before=turn(refused))) == []


def test_only_this_turns_calls_count() -> None:
    earlier_turn = [*read(), *ran(search(FIRST_HALF), "results"), AIMessage("ok", id="done")]
    case = ([*earlier_turn, HumanMessage("and now", id="h2")], [search(SECOND_HALF)])
    assert passed(case) == [case[1][0]["id"]]  # a documented limit: the turn is the window
