"""Every script a test makes must be played to its end, and no further.

`ScriptedModel` and the model emulators (`ScriptedServer`) `track` themselves when made; the
autouse fixture in tests/conftest.py collects them for one test (`tracking`) and fails a test
that passed but left one `unplayed`, unless it is marked `off_script("why")`. A script made
outside a test (a module-scoped fixture, a subprocess) is not tracked. The registry is one
list per process, so pytest-xdist workers each have their own, and copies of a model that share
its script (`_Script.__deepcopy__`) are one entry.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from langchain_core.messages import AIMessage


class Played(Protocol):
    """A script that can tell whether it was played to its end."""

    created_at: str

    def assert_complete(self) -> None: ...


_tracked: list[Played] | None = None  # the scripts of the running test; None between tests


def created_at() -> str:
    """The line of the test module that made a script (directly, or through a helper)."""
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if path.name.startswith("test_"):
            return f"{path.name}:{frame.lineno}"
    return "outside a test module"


def track(script: Played) -> None:
    """Check `script` at the end of the running test (nothing happens outside a test)."""
    if _tracked is not None:
        _tracked.append(script)


@contextmanager
def tracking() -> Iterator[list[Played]]:
    """Collect the scripts made while this block runs (one test)."""
    global _tracked
    outer, _tracked = _tracked, []
    try:
        yield _tracked
    finally:
        _tracked = outer


def unplayed(scripts: Sequence[Played]) -> list[str]:
    """What each incomplete script left: `where it was made: which steps`."""
    problems = []
    for script in scripts:
        try:
            script.assert_complete()
        except AssertionError as exc:
            problems.append(f"{script.created_at}: {exc}")
    return problems


def describe(step: object, width: int = 100) -> str:
    """One short line for a scripted step: what it answers or calls, or what it raises."""
    if isinstance(step, AIMessage):
        calls = ", ".join(f"{c['name']}({c['args']})" for c in step.tool_calls)
        text = f"tool call {calls}" if calls else f"answer {step.content!r}"
    elif isinstance(step, BaseException):
        text = f"raise {step!r}"
    elif isinstance(step, str):
        text = f"answer {step!r}"
    elif callable(step):
        text = f"callable {getattr(step, '__qualname__', repr(step))}"
    else:
        text = repr(step)
    return text if len(text) <= width else text[: width - 1] + "…"


def unplayed_message(steps: Sequence[object], scripted: int) -> str:
    """`N of M steps unplayed (K calls made); next: …` naming the steps left."""
    played = scripted - len(steps)
    shown = [describe(step) for step in list(steps)[:5]]
    more = f"; and {len(steps) - 5} more" if len(steps) > 5 else ""
    return (
        f"{len(steps)} of {scripted} steps unplayed ({played} calls made); "
        f"left: {'; '.join(shown)}{more}"
    )
