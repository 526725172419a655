"""What the loop and the CLI rely on of a Ferry saver, whatever its back end: `FerryStore`.

Ferry's SQLite saver (`FerrySaver`, the server's too) and its Postgres savers implement it; a
saver of the caller's own (LangGraph's, one in memory) does not, and runs without what it gives:
no lease per thread, no record of started calls. Callers ask `ferry_store(saver)`, never which
class a saver is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from graph.storage.history.folding import Fold
    from graph.storage.leases.sqlite import LeaseStore


@runtime_checkable
class FerryStore(Protocol):
    """A Ferry saver: started calls, leases on threads, and the upkeep of what is stored."""

    fold: Fold | None
    """The `messages` reducer it folds histories with; None leaves them to LangGraph."""

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        ...

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        ...

    def leases(self, timeout_s: float, *, holder: str) -> LeaseStore | None:
        """The store of this database's leases on threads; None where none can be taken.

        A lease with no heartbeat for `timeout_s` has expired; `holder` names this run's.
        """
        ...

    def stored_bytes(self) -> int:
        """Disk space the stored threads take."""
        ...

    def compact(self) -> None:
        """Give the space freed by deleted threads and checkpoints back to the file system."""
        ...

    def prune_checkpoints(self, thread_ids: Sequence[str], *, keep: int) -> int:
        """Keep the newest `keep` checkpoints of each thread; return how many went.

        Raises:
            NotSupportedByDatabase: The back end cannot (the message says what to use instead).
        """
        ...

    def threads_updated_before(self, cutoff: datetime) -> list[str]:
        """Ids of the threads whose last checkpoint is older than `cutoff` (timezone-aware)."""
        ...


def ferry_store(saver: object) -> FerryStore | None:
    """`saver` as a Ferry saver; None for a saver of the caller's own."""
    return saver if isinstance(saver, FerryStore) else None


if TYPE_CHECKING:  # mypy checks that each of Ferry's savers is one, methods and signatures
    from graph.storage.postgres.saver import AsyncFerryPostgresSaver, FerryPostgresSaver
    from graph.storage.sqlite.saver import FerrySaver

    _SAVERS: tuple[type[FerryStore], ...] = (
        FerrySaver,
        FerryPostgresSaver,
        AsyncFerryPostgresSaver,
    )
