"""The message reducer a saver folds Ferry's messages with: handed in, never imported.

Storage knows how messages are stored, not how a turn's updates merge into a history: that is
the agent's reducer (Ferry's is `graph.state.fold_messages`, the `messages` channel's). A saver
takes it as `fold=`; one made without is given the reducer set by `fold_by_default`, which
the `graph` package does as it is imported, so `graph.storage.sqlite_saver(path)` folds as
Ferry's graph does. With no reducer at all, a saver hands LangGraph the writes to fold with
the graph's own reducer (correct, only slower: nothing is held). This module imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Fold = Callable[[list[Any], Sequence[Any]], list[Any]]
"""A `messages` reducer given every update of a history at once: (messages, updates) → new list."""

_DEFAULT: list[Fold] = []


def fold_by_default(fold: Fold) -> None:
    """Make `fold` the reducer of every saver made without one from now on."""
    _DEFAULT[:] = [fold]


def default_fold() -> Fold | None:
    """The reducer `fold_by_default` set; None if none was."""
    return _DEFAULT[0] if _DEFAULT else None
