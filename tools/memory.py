"""Long-term memory: facts the model is asked to keep, carried across a user's threads.

Memories live in a LangGraph store (`BaseStore`) in the same database as the threads, under
the namespace `("ferry", "memories", USER)`: `FERRY_USER` (default: the login name), or the
user the LangGraph server authenticated. Only the model's `remember` call writes one (a tool
result alone never does); `ferry memory list` shows them and `ferry memory forget` removes
them. `recall` reads them; its results are private, like `read_file`'s, so the outbound rule
applies once the model has seen them. At the start of a turn, the memories that share words
with the question are offered to the model (`relevant`), bounded in size.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedStore
from langgraph.store.base import BaseStore, Item

from tools.settings import tool_settings

SERVER_USER_KEY = "langgraph_auth_user_id"
"""`configurable` key under which the LangGraph server puts the authenticated user's id."""
MAX_FACT_CHARS = 1_000
_LISTED = 1_000  # memories read per search: far more than a prompt takes
_WORD = re.compile(r"[^\W\d_]{4,}")
_COMMON = frozenset(
    "that this what when where which with your have from about there their they them would "
    "could should remember recall know tell please like just also been were will into than "
    "then some more most other only very much does".split()
)


@dataclass(frozen=True)
class Memory:
    """One memory, as `ferry memory list` shows it."""

    id: str
    fact: str
    created_at: datetime

    @classmethod
    def of(cls, item: Item) -> Memory:
        """The memory a store item holds."""
        return cls(id=item.key, fact=str(item.value.get("fact", "")), created_at=item.created_at)


def namespace(user: str) -> tuple[str, ...]:
    """Where `user`'s memories are kept in the store."""
    return ("ferry", "memories", user)


def user_of(config: RunnableConfig | None) -> str:
    """Whose memories a run reads and writes: the server's authenticated user, or `FERRY_USER`."""
    configurable = (config or {}).get("configurable", {})
    server_user = configurable.get(SERVER_USER_KEY)
    return str(server_user) if server_user else tool_settings(config).user


def memories(store: BaseStore, user: str) -> list[Memory]:
    """Every memory of `user`, oldest first."""
    items = store.search(namespace(user), limit=_LISTED)  # a prefix: deeper ones are not theirs
    own = [item for item in items if tuple(item.namespace) == namespace(user)]
    return sorted((Memory.of(item) for item in own), key=lambda m: (m.created_at, m.id))


def relevant(store: BaseStore, user: str, question: str, max_chars: int) -> list[Memory]:
    """The memories that share a word with `question`, newest first, within `max_chars`."""
    words = _words(question)
    if not words:
        return []
    chosen, used = [], 0
    for memory in reversed(memories(store, user)):
        if words & _words(memory.fact) and used + len(memory.fact) <= max_chars:
            chosen.append(memory)
            used += len(memory.fact)
    return chosen


def forget(store: BaseStore, user: str, ids: Iterable[str]) -> list[str]:
    """Delete `user`'s memories with these ids; the ids that were there."""
    known = {m.id for m in memories(store, user)}
    gone = [i for i in ids if i in known]
    for memory_id in gone:
        store.delete(namespace(user), memory_id)
    return gone


def _words(text: str) -> set[str]:
    return {w for w in (m.lower() for m in _WORD.findall(text)) if w not in _COMMON}


@tool(parse_docstring=True)
def remember(
    fact: str,
    config: RunnableConfig,
    store: Annotated[BaseStore, InjectedStore()],
) -> str:
    """Keep a fact about the user for later conversations (preferences, names, decisions).

    Only what the user asked to be remembered, or clearly wants kept, in their own words.

    Args:
        fact: the fact, one short sentence.
        config: the run's (not the model's): whose memories these are.
        store: the run's store (not the model's).
    """
    fact = " ".join(fact.split())
    if not fact:
        return "Nothing remembered: the fact is empty."
    if len(fact) > MAX_FACT_CHARS:
        return f"Nothing remembered: a fact is at most {MAX_FACT_CHARS} characters."
    memory_id = uuid.uuid4().hex[:12]
    store.put(namespace(user_of(config)), memory_id, {"fact": fact}, index=False)
    return f"Remembered ({memory_id}): {fact}"


@tool(parse_docstring=True)
def recall(
    query: str,
    config: RunnableConfig,
    store: Annotated[BaseStore, InjectedStore()],
) -> str:
    """Look up what the user asked to be remembered in earlier conversations.

    Args:
        query: words to look for; empty for everything remembered.
        config: the run's (not the model's): whose memories these are.
        store: the run's store (not the model's).
    """
    kept = memories(store, user_of(config))
    words = _words(query)
    found = [m for m in kept if not words or words & _words(m.fact)]
    if not found:
        return "Nothing remembered matches." if kept else "Nothing is remembered yet."
    return "\n".join(f"- {m.fact}" for m in found)


remember.metadata = {"retry_safe": False}  # a second run would keep the fact twice
recall.metadata = {"private": True}  # the user's own data: the outbound rule applies


def as_note(found: list[Memory]) -> str:
    """The memories offered to the model at the start of a turn."""
    return "[Ferry: what the user asked you to remember, from earlier conversations]\n" + (
        "\n".join(f"- {m.fact}" for m in found)
    )
