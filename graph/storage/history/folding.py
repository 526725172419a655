"""The message reducer a saver folds Ferry's messages with: handed in, never imported.

Storage knows how messages are stored, not how a turn's updates merge into a history: that is
the agent's reducer (Ferry's is `graph.state.fold_messages`, the `messages` channel's). A saver
takes it as `fold=` from whoever opens it: Ferry's entry points pass Ferry's (`graph.storage`'s
factories hand it down), and `build_graph` gives its own to a Ferry saver handed in without
one. With no reducer at all, a saver hands LangGraph the writes to fold with the graph's own
reducer (correct, only slower: nothing is held). This module imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Fold = Callable[[list[Any], Sequence[Any]], list[Any]]
"""A `messages` reducer given every update of a history at once: (messages, updates) → new list."""
