"""The golden files' four threads: their tools, their questions and the model's replies.

`make_files.py` plays them on a release's code to write the files; the golden-file test
compiles today's graph on the same tools to continue and resume them. Imports nothing from
graph/ (the generator imports this module next to a release's `graph`, the test next to
today's). Every reply has a fixed message id and every call a fixed id, so a rerun writes the
same messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool

SHORT = "golden-short"
LONG = "golden-long"
APPROVAL = "golden-approval"
KILLED = "golden-killed"
THREADS = (SHORT, LONG, APPROVAL, KILLED)
APPROVE_TOOLS = "archive_note"
"""`FERRY_APPROVE_TOOLS` for every run on the files: archive_note waits for a person."""

GLOSSARY = {
    "ferry": "a boat that carries people across water",
    "jetty": "a platform built out into the water",
    "hull": "the body of a ship",
    "keel": "the spine along the bottom of a hull",
    "stern": "the back of a ship",
    "bow": "the front of a ship",
    "ñandú": "a large flightless bird of South America",
    "bollard": "a short post a ship's rope is tied to",
}
ARCHIVED: list[str] = []
"""Every note `archive_note` archived in this process."""
INVOICES: list[int] = []
"""Every amount `send_invoice` sent in this process."""
HOLD: list[Callable[[], None]] = []
"""Called by `send_invoice` before it sends: the generator blocks the killed turn here."""


@tool(parse_docstring=True)
def look_up(word: str) -> str:
    """Look a word up in the ship glossary.

    Args:
        word: The word, lower case.
    """
    if word not in GLOSSARY:
        raise ValueError(f"{word!r} is not in the glossary")
    return f"{word}: {GLOSSARY[word]}"


@tool(parse_docstring=True)
def archive_note(note: str) -> str:
    """Archive a note for the user (needs the user's approval).

    Args:
        note: The note's text.
    """
    ARCHIVED.append(note)
    return f"archived: {note}"


@tool(parse_docstring=True)
def send_invoice(amount: int) -> str:
    """Send an invoice; sending it twice would bill the customer twice.

    Args:
        amount: The amount in euros.
    """
    for hold in HOLD:
        hold()
    INVOICES.append(amount)
    return f"invoice for {amount} EUR sent"


send_invoice.metadata = {"retry_safe": False}
TOOLS: list[BaseTool] = [look_up, archive_note, send_invoice]


def reply(reply_id: str, text: Any = "", *calls: tuple[str, str, dict[str, Any]]) -> AIMessage:
    """A model reply with a fixed id: `text` (text or content blocks), (id, name, args) calls."""
    tool_calls = [
        {"id": call_id, "name": name, "args": args, "type": "tool_call"}
        for call_id, name, args in calls
    ]
    usage = {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52} if text else None
    return AIMessage(content=text, id=reply_id, tool_calls=tool_calls, usage_metadata=usage)


SHORT_QUESTION = "What is a ferry?"
SHORT_REPLIES = [
    reply("short-a1", "", ("short-c1", "look_up", {"word": "ferry"})),
    reply("short-a2", "A ferry is a boat that carries people across water."),
]


def _turn(n: int, question: str, answer: Any, *words: str) -> tuple[str, list[AIMessage]]:
    """Turn `n` of the long thread: `question`, `look_up` of each of `words`, `answer`."""
    if not words:
        return question, [reply(f"long-{n}-a1", answer)]
    calls = [(f"long-{n}-c{i}", "look_up", {"word": w}) for i, w in enumerate(words, 1)]
    return question, [reply(f"long-{n}-a1", "", *calls), reply(f"long-{n}-a2", answer)]


BOW_AND_STERN = "The bow is the front of a ship; the stern is the back."


def long_turns() -> list[tuple[str, list[AIMessage]]]:
    """The long thread's turns (question, replies): 79 messages, so it is stored in two parts."""
    blocks = [{"type": "text", "text": "Un ñandú es un ave grande que no vuela 🦤."}]
    special: dict[int, tuple[Any, ...]] = {
        # two calls at once
        3: ("What are the bow and the stern?", BOW_AND_STERN, "bow", "stern"),
        # the tool fails, the model answers from its error
        5: ("What is a gunwale?", "The glossary has no entry for gunwale.", "gunwale"),
        8: ("Thanks!", "You are welcome."),  # no tool
        11: ("¿Qué es un «ñandú»?", blocks, "ñandú"),  # non-ASCII; content blocks
    }
    words = [w for w in GLOSSARY if w != "ñandú"]
    turns = []
    for n in range(20):
        word = words[n % len(words)]
        usual = (f"Turn {n}: what is a {word}?", f"A {word} is {GLOSSARY[word]}.", word)
        turns.append(_turn(n, *special.get(n, usual)))
    return turns


APPROVAL_QUESTION = "Please archive a note: the jetty needs paint."
APPROVAL_REPLIES = [
    reply("approval-a1", "", ("approval-c1", "archive_note", {"note": "the jetty needs paint"})),
]
"""The run pauses on this call: the file holds the thread awaiting approval."""

KILLED_QUESTION = "Send the invoice of 120 EUR to the harbour office."
KILLED_REPLIES = [reply("killed-a1", "", ("killed-c1", "send_invoice", {"amount": 120}))]
"""The process is killed inside send_invoice: the file holds the call started, unanswered."""
