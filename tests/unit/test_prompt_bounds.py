"""The prompt stays bounded in messages as a thread grows, and is built incrementally.

Structure only, never time: how many messages are sent, which turns, in what order, and that
a prompt built call by call equals one built from scratch.
"""

from __future__ import annotations

import random

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from graph.prompt import MAX_RESULT_CHARS, OMITTED, SYSTEM_PROMPT, PromptCache, for_model

BUDGET = 4_000


def turn(n: int, rounds: int = 1, calls: int = 1, size: int = 2_000) -> list[AnyMessage]:
    """One turn: the question, `rounds` rounds of `calls` parallel calls, the answer."""
    messages: list[AnyMessage] = [HumanMessage(f"question {n}", id=f"h{n}")]
    for r in range(rounds):
        ids = [f"c{n}-{r}-{j}" for j in range(calls)]
        tool_calls = [
            {"name": "fetch", "args": {"n": n}, "id": i, "type": "tool_call"} for i in ids
        ]
        messages.append(AIMessage("", tool_calls=tool_calls, id=f"a{n}-{r}"))
        messages += [ToolMessage("x" * size, tool_call_id=i, name="fetch", id=f"r{i}") for i in ids]
    messages.append(AIMessage(f"answer {n}", id=f"f{n}"))
    return messages


def random_turn(n: int, rng: random.Random) -> list[AnyMessage]:
    size = rng.choice([5, 300, 2_000, 6_000, MAX_RESULT_CHARS + 500])
    return turn(n, rounds=rng.randint(0, 3), calls=rng.randint(1, 3), size=size)


def grow(history: list[AnyMessage], new_turn: list[AnyMessage]) -> list[list[AnyMessage]]:
    """Add a turn; the histories the model is called with: at its question and after results."""
    start = len(history)
    history += new_turn
    ends = [
        i + 1
        for i in range(start, len(history))
        if isinstance(history[i], HumanMessage)
        or (isinstance(history[i], ToolMessage) and not isinstance(history[i + 1], ToolMessage))
    ]
    return [history[:end] for end in ends]


def assert_well_formed(prompt: list[BaseMessage], history: list[AnyMessage]) -> None:
    """System prompt, first question, the note if turns were left out, then whole latest turns."""
    assert isinstance(prompt[0], SystemMessage) and prompt[0].content == SYSTEM_PROMPT
    assert not any(isinstance(m, SystemMessage) for m in prompt[1:])
    assert prompt[1] is history[0]
    rest = prompt[2:]
    if rest and rest[0].content == OMITTED:
        rest = rest[1:]
        start = len(history) - len(rest)
        assert start > 1 and isinstance(history[start], HumanMessage)  # whole turns left out
    else:
        start = 1
    assert [m.id for m in rest] == [m.id for m in history[start:]]  # the latest turns, in order
    latest = max(i for i, m in enumerate(history) if isinstance(m, HumanMessage))
    assert start <= max(latest, 1)  # the latest turn is sent whole
    called: set[str] = set()
    for message in prompt:  # every result follows its call, every call has its result
        if isinstance(message, AIMessage):
            called |= {c["id"] or "" for c in message.tool_calls}
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in called
    answered = {m.tool_call_id for m in prompt if isinstance(m, ToolMessage)}
    last = history[-1]
    waiting = {c["id"] for c in last.tool_calls} if isinstance(last, AIMessage) else set()
    assert called - answered <= waiting


def test_the_messages_sent_stay_bounded_as_the_thread_grows_far_past_the_budget() -> None:
    history: list[AnyMessage] = []
    sizes = []
    for n in range(1, 601):
        for sent_to in grow(history, turn(n, rounds=3)):
            prompt = for_model(sent_to, BUDGET)
            assert_well_formed(prompt, sent_to)
            assert count_tokens_approximately(prompt) <= BUDGET
            sizes.append(len(prompt))
    assert len(history) == 600 * 8 and max(sizes) <= 30  # about six 550-token results fit
    assert [m.content for m in prompt[:3]] == [SYSTEM_PROMPT, "question 1", OMITTED]


def test_the_latest_turn_is_sent_whole_even_over_the_budget() -> None:
    history = [*turn(1), *turn(2), *turn(3, rounds=6)]
    prompt = for_model(history, 1_000)
    assert_well_formed(prompt, history)
    assert [m.id for m in prompt[3:]] == [m.id for m in turn(3, rounds=6)]
    assert count_tokens_approximately(prompt) > 1_000


def test_a_prompt_under_the_budget_is_the_whole_history_without_a_note() -> None:
    history = [*turn(1), *turn(2)]
    prompt = for_model(history, 100_000)
    assert [m.id for m in prompt[1:]] == [m.id for m in history]
    assert all(m.content != OMITTED for m in prompt)


def test_between_drops_the_prompt_grows_by_appending() -> None:
    history: list[AnyMessage] = []
    previous: list[BaseMessage] = []
    drops = 0
    for n in range(1, 201):
        for sent_to in grow(history, turn(n)):
            prompt = for_model(sent_to, 12_000)
            if prompt[: len(previous)] != previous:
                drops += 1
            previous = prompt
    # A turn is ~560 tokens and each drop frees a quarter of the budget (five turns' worth):
    # dropping one turn whenever one is added would change the prompt 200 times.
    assert 1 < drops <= 200 // 4


def test_an_incremental_prompt_equals_one_built_from_scratch() -> None:
    rng = random.Random(14)
    for budget in (1_000, 3_000, 12_000):
        cache = PromptCache()
        history: list[AnyMessage] = []
        for n in range(1, 60):
            for sent_to in grow(history, random_turn(n, rng)):
                prompt = cache.prompt(sent_to, budget).messages
                assert prompt == PromptCache().prompt(sent_to, budget).messages
                assert_well_formed(prompt, sent_to)


def test_a_changed_history_is_not_served_a_stale_prompt() -> None:
    rng = random.Random(1014)
    cache = PromptCache()
    history: list[AnyMessage] = []
    for n in range(1, 60):
        history += random_turn(n, rng)
    cache.prompt(history, 3_000)
    edited = list(history)
    i = rng.randrange(len(history) - 10, len(history))
    edited[i] = edited[i].model_copy(update={"content": "edited"})  # replaced by id
    removed = history[:-3] + history[-2:]
    copies = [m.model_copy() for m in history]  # equal messages, as rebuilt from storage
    other_thread = [*history[:1], *turn(2, size=10), *history[-4:]]  # same ids, other messages
    for variant in (edited, removed, copies, other_thread, history):
        assert cache.prompt(variant, 3_000) == PromptCache().prompt(variant, 3_000)
        cache.prompt(history, 3_000)
    assert cache.prompt(history, 6_000) == PromptCache().prompt(history, 6_000)


def test_threads_interleaved_on_one_cache_get_their_own_prompts() -> None:
    rng = random.Random(7)
    cache = PromptCache(size=3)
    threads: list[list[AnyMessage]] = [[] for _ in range(5)]
    for n in range(1, 25):
        for history in threads:  # the same ids in every thread, different contents
            history += random_turn(n, rng)
            assert cache.prompt(history, 2_000) == PromptCache().prompt(history, 2_000)


def test_building_a_prompt_changes_nothing_stored() -> None:
    history = [*turn(1, size=MAX_RESULT_CHARS + 10), *turn(2), *turn(3)]
    before = [m.model_copy(deep=True) for m in history]
    for_model(history, 1_000)
    assert history == before
